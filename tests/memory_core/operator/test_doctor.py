"""Doctor finds disagreements between Chroma, the lexical index and the graph, and repairs them
without losing a healthy memory — on every vector backend."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from graph.sqlite.db import window_table_name
from graph.sqlite.txn import SqliteTxn
from memory_core import MemoryCore
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.transfer import export_tenant
from tests.support.agreement import assert_stores_agree
from tests.support.sqlite import sqlite_db

GHOST_META = {"tenant": "acme", "session": "s9", "agent": "ghost", "type": "note", "ts_us": 1_760_000_000_000_000,
              "visibility": "tenant", "salience": 0.6, "project_id": "", "kind": "memory", "channel": "irc",
              "source_id": "irc:7"}


def populate(core: MemoryCore) -> dict[str, str]:
    refs = {}
    for text in ["planting apple trees", "pruning the pear orchard", "harvest plans for plums"]:
        refs[text] = core.add_memory("acme", "s1", "alice", text).ref
        core.add_memory("globex", "s1", "bob", f"globex {text}")
    core.add_memory("acme", "s1", "alice", "ship the cider on friday", type="decision")
    return refs


def healthy(core: MemoryCore) -> dict[str, list[dict]]:
    return {t: list(export_tenant(core.operator_parts(), t)) for t in ("acme", "globex")}


def fts_name(core: MemoryCore, tenant: str) -> str:
    db = sqlite_db(core)
    assert db is not None
    with db.lock:
        return str(db.conn.execute("SELECT name FROM fts_tables WHERE tenant = ?", (tenant,)).fetchone()[0])


def kinds(findings: list) -> list[tuple[str, str, str | None]]:
    return sorted((f.kind, f.tenant, f.ref) for f in findings)


@pytest.mark.slow
def test_a_healthy_store_has_no_findings(core: MemoryCore) -> None:
    populate(core)
    report = check_stores(core.operator_parts())
    assert report.ok and report.findings == []
    assert {(c.tenant, c.rows, c.counted, c.vectors, c.lexical) for c in report.counts} == {
        ("acme", 4, 4, 4, 4), ("globex", 3, 3, 3, 3)}


@pytest.mark.slow
def test_a_vector_record_without_graph_node_is_restored_as_a_memory(core: MemoryCore) -> None:
    populate(core)
    before = healthy(core)
    vector = core._embedder.embed(["the ghost remembers the orchard"])
    core._vectors.upsert("acme", ["mem:500"], vector, ["the ghost remembers the orchard"], [GHOST_META])
    assert kinds(check_stores(core.operator_parts()).findings) == [("vector_orphan", "acme", "mem:500")]
    report = repair_stores(core.operator_parts())
    assert report.ok and report.remaining == []
    row = core.check_memory("acme", "mem:500").memory
    assert (row.session, row.agent, row.type, row.channel) == ("s9", "ghost", "note", "irc")
    assert row.source == {"id": "irc:7"} and row.metadata == {"restored_by": "doctor"}
    assert row.content == "the ghost remembers the orchard"
    assert core.recall("acme", "ghost orchard").messages[0].ref == "mem:500"
    after = healthy(core)
    assert [line for line in after["acme"] if line["ref"] != "mem:500"] == before["acme"]
    assert after["globex"] == before["globex"]
    assert_stores_agree(core)


@pytest.mark.slow
def test_an_orphan_vector_record_that_cannot_be_rebuilt_is_quarantined_not_lost(core: MemoryCore) -> None:
    populate(core)
    before = healthy(core)
    vector = core._embedder.embed(["half a record"])
    core._vectors.upsert("acme", ["mem:600"], vector, ["half a record"], [{"tenant": "acme", "kind": "memory"}])
    report = repair_stores(core.operator_parts())
    assert report.ok
    [done] = [r for r in report.repairs if r.ref == "mem:600"]
    assert "quarantine" in done.action
    saved = [json.loads(line) for path in (core.data_dir / "doctor").glob("quarantine-*.jsonl")
             for line in path.read_text().splitlines()]
    assert [(s["ref"], s["document"]) for s in saved] == [("mem:600", "half a record")]
    assert healthy(core) == before
    assert_stores_agree(core)


@pytest.mark.slow
def test_a_graph_node_without_vector_record_is_re_embedded_from_sqlite(core: MemoryCore) -> None:
    refs = populate(core)
    before = healthy(core)
    lost = refs["pruning the pear orchard"]
    core._vectors.delete("acme", [lost])
    assert kinds(check_stores(core.operator_parts()).findings) == [("vector_missing", "acme", lost)]
    report = repair_stores(core.operator_parts())
    assert report.ok and [r.kind for r in report.repairs] == ["vector_missing"]
    assert healthy(core) == before
    assert lost in {m.ref for m in core.recall("acme", "pear orchard pruning").messages}
    assert_stores_agree(core)


@pytest.mark.slow
def test_stale_lexical_rows_are_rebuilt_for_that_tenant_only(core: MemoryCore) -> None:
    refs = populate(core)
    before = healthy(core)
    target = refs["harvest plans for plums"]
    mem_id = int(target.split(":")[1])
    name = fts_name(core, "acme")
    with sqlite_db(core).transaction() as cur:
        cur.execute(f"INSERT INTO {name} ({name}, rowid, content) VALUES ('delete', ?, ?)",
                    (mem_id, "harvest plans for plums"))
        cur.execute(f"INSERT INTO {name} (rowid, content) VALUES (?, ?)", (mem_id, "zebra migration"))
        cur.execute(f"INSERT INTO {name} (rowid, content) VALUES (?, ?)", (9999, "phantom row"))
    assert kinds(check_stores(core.operator_parts()).findings) == [("lexical_stale", "acme", target),
                                                                   ("lexical_stale", "acme", "mem:9999")]
    report = repair_stores(core.operator_parts())
    assert report.ok
    assert [(r.kind, r.tenant) for r in report.repairs] == [("lexical", "acme")]
    db = sqlite_db(core)
    assert db is not None
    with db.lock:
        hits = db.conn.execute(f"SELECT rowid FROM {name} WHERE {name} MATCH 'plums'").fetchall()
        phantom = db.conn.execute(f"SELECT rowid FROM {name} WHERE {name} MATCH 'phantom OR zebra'").fetchall()
    assert [h[0] for h in hits] == [mem_id] and phantom == []
    assert healthy(core) == before
    assert_stores_agree(core)


@pytest.mark.slow
def test_a_damaged_lexical_window_is_found_and_rebuilt(core: MemoryCore) -> None:
    refs = populate(core)
    target = refs["pruning the pear orchard"]
    name = window_table_name("acme")
    with sqlite_db(core).transaction() as cur:
        cur.execute(f"UPDATE {name} SET prev = 'zebra' WHERE rowid = ?", (int(target.split(":")[1]),))
        cur.execute(f"INSERT INTO {name} (rowid, content, prev) VALUES (4343, 'phantom', '')")
    assert kinds(check_stores(core.operator_parts()).findings) == sorted(
        [("lexical_stale", "acme", ref) for ref in ("mem:4343", target)])
    report = repair_stores(core.operator_parts())
    assert report.ok and [(r.kind, r.tenant) for r in report.repairs] == [("lexical", "acme")]
    db = sqlite_db(core)
    assert db is not None
    with db.lock:
        left = db.conn.execute(f"SELECT count(*) FROM {name} WHERE {name} MATCH 'zebra OR phantom'").fetchone()
    assert left[0] == 0
    assert_stores_agree(core)


def test_a_vector_record_whose_content_differs_is_rewritten_from_sqlite(core: MemoryCore) -> None:
    refs = populate(core)
    target = refs["planting apple trees"]
    vector = core._embedder.embed(["tampered text"])
    meta = {**GHOST_META, "session": "s1", "agent": "alice", "type": "turn"}
    core._vectors.upsert("acme", [target], vector, ["tampered text"], [meta])
    assert [f.kind for f in check_stores(core.operator_parts()).findings] == ["vector_stale"]
    assert repair_stores(core.operator_parts()).ok
    assert_stores_agree(core)


@pytest.mark.slow
def test_dangling_and_cross_tenant_edges_are_deleted(core: MemoryCore) -> None:
    refs = populate(core)
    src = refs["planting apple trees"]
    with sqlite_db(core).lock:
        foreign = sqlite_db(core).conn.execute("SELECT id FROM memories WHERE tenant = 'globex' LIMIT 1").fetchone()[0]
    with sqlite_db(core).transaction() as cur:
        cur.execute("INSERT INTO edges VALUES (?, 'mem:777', 'SUPERSEDES', 'acme')", (src,))
        cur.execute("INSERT INTO edges VALUES (?, ?, 'SUPERSEDES', 'acme')", (src, f"mem:{foreign}"))
    assert [f.kind for f in check_stores(core.operator_parts()).findings] == ["dangling_edge", "dangling_edge"]
    report = repair_stores(core.operator_parts())
    assert report.ok and len(report.repairs) == 2
    assert core.check_memory("acme", src).neighbours["edges"] == [
        {"direction": "out", "kind": k, "node": n} for k, n in
        (("AUTHORED_BY", "agent:acme/alice"), ("IN_SESSION", "session:acme/s1"))]


@pytest.mark.slow
def test_a_lost_agent_node_and_session_edge_are_recreated_not_dropped(core: MemoryCore) -> None:
    refs = populate(core)
    target = refs["planting apple trees"]
    with sqlite_db(core).transaction() as cur:
        cur.execute("DELETE FROM nodes WHERE node_id = 'agent:acme/alice'")
        cur.execute("DELETE FROM edges WHERE src = ? AND kind = 'IN_SESSION'", (target,))
    core._graph.invalidate()
    found = check_stores(core.operator_parts()).findings
    assert sorted((f.kind, f.ref, f.detail) for f in found) == [
        ("graph_missing", "mem:1", "its AGENT node agent:acme/alice is missing"),
        ("graph_missing", target, "its IN_SESSION edge to session:acme/s1 is missing"),
    ]
    assert repair_stores(core.operator_parts()).ok
    edges = {(e["kind"], e["node"]) for e in core.check_memory("acme", target).neighbours["edges"]}
    assert edges == {("AUTHORED_BY", "agent:acme/alice"), ("IN_SESSION", "session:acme/s1")}
    assert core._graph.agents("acme") == frozenset({"alice"})
    assert_stores_agree(core)


@pytest.mark.slow
def test_an_interrupted_add_is_rolled_back_not_restored(core: MemoryCore) -> None:
    populate(core)
    before = healthy(core)
    vector = core._embedder.embed(["never acknowledged"])
    core._vectors.upsert("acme", ["mem:800"], vector, ["never acknowledged"], [GHOST_META])
    with sqlite_db(core).transaction() as cur:
        cur.execute("INSERT INTO journal (op, tenant, item_id, created_us) VALUES ('add', 'acme', 'mem:800', ?)",
                    (time.time_ns() // 1000,))
    assert kinds(check_stores(core.operator_parts()).findings) == [("journal_pending", "acme", "mem:800")]
    report = repair_stores(core.operator_parts())
    assert report.ok
    assert [(r.kind, r.action) for r in report.repairs] == [("journal_pending", "rolled back unacknowledged add")]
    assert healthy(core) == before
    assert_stores_agree(core)


@pytest.mark.slow
def test_every_planted_problem_at_once_is_repaired_and_healthy_memories_survive(
    core: MemoryCore, tmp_path: Path
) -> None:
    refs = populate(core)
    before = healthy(core)
    core._vectors.delete("acme", [refs["planting apple trees"]])
    vector = core._embedder.embed(["the ghost remembers"])
    core._vectors.upsert("acme", ["mem:500"], vector, ["the ghost remembers"], [GHOST_META])
    name = fts_name(core, "globex")
    with sqlite_db(core).transaction() as cur:
        cur.execute(f"INSERT INTO {name} (rowid, content) VALUES (4242, 'phantom')")
    assert len(check_stores(core.operator_parts()).findings) == 3
    assert repair_stores(core.operator_parts()).ok
    after = healthy(core)
    assert after["globex"] == before["globex"]
    assert [line for line in after["acme"] if line["ref"] != "mem:500"] == before["acme"]
    assert check_stores(core.operator_parts()).ok
    assert_stores_agree(core)


@pytest.mark.slow
def test_a_restore_whose_graph_write_fails_keeps_the_vector_record(
    core: MemoryCore, monkeypatch: pytest.MonkeyPatch
) -> None:
    populate(core)
    vector = core._embedder.embed(["the only copy"])
    core._vectors.upsert("acme", ["mem:500"], vector, ["the only copy"], [GHOST_META])

    def failing_write(self: SqliteTxn, row: dict) -> None:
        raise sqlite3.OperationalError("simulated failure after the Chroma upsert")

    monkeypatch.setattr(SqliteTxn, "write_memory", failing_write)
    report = repair_stores(core.operator_parts())
    assert not report.ok
    assert core._vectors.documents("acme", ["mem:500"])["mem:500"][0] == "the only copy"
    findings = check_stores(core.operator_parts()).findings
    assert findings and kinds(findings) == [("vector_orphan", "acme", "mem:500")]
    monkeypatch.undo()
    assert repair_stores(core.operator_parts()).ok
    assert core.check_memory("acme", "mem:500").memory.content == "the only copy"


@pytest.mark.slow
def test_recovery_never_deletes_the_record_of_an_interrupted_restore(core: MemoryCore) -> None:
    populate(core)
    vector = core._embedder.embed(["restored when the repair died"])
    core._vectors.upsert("acme", ["mem:500"], vector, ["restored when the repair died"], [GHOST_META])
    with sqlite_db(core).transaction() as cur:
        cur.execute("INSERT INTO journal (op, tenant, item_id, created_us) VALUES ('restore', 'acme', 'mem:500', ?)",
                    (time.time_ns() // 1000,))
    [done] = core._writer.recover()
    assert done["action"].startswith("left the vector record")
    assert "mem:500" in core._vectors.all_ids("acme")
    assert repair_stores(core.operator_parts()).ok
    assert core.check_memory("acme", "mem:500").memory.content == "restored when the repair died"
