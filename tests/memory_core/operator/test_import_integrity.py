"""Imports that cannot hurt the store (issue 37, points 6-9), through the library and the CLI.

6. A file's refs never move the id sequence out of the range refs can name; doctor notices a
   sequence that was moved there anyway, and a repair brings it back.
7. A line skipped as already present changes nothing; a line whose idempotency key names another
   memory is refused, never answered by that memory (so its state cannot land on it).
8. A line that is not UTF-8 is a coded error naming the line, like any malformed line.
9. Version chains in a file are refused when they hold a cycle, a self-loop or a fork.

Each runs on both graph backends: SQLite ("memory": in-memory vectors) and PostgreSQL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.errors import StoreError
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from memory_core.refs import MAX_ID
from memory_core.settings import load_settings
from memory_core.write.rows import content_hash
from tests.support.agreement import assert_stores_agree
from tests.support.backends import open_core, store_backends
from tests.support.sqlite import sqlite_db
from tools.cli.app import app

T0 = "2026-03-01T10:00:00.000000+00:00"
runner = CliRunner()


@pytest.fixture(params=store_backends("memory", "postgres"))
def graph_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(graph_backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    core = open_core(graph_backend, tmp_path / "data", request)
    yield core
    core.close()


def line(ref: str, content: str, ts: str = T0, **extra: Any) -> dict[str, Any]:
    """One valid export line of tenant acme."""
    return {"ref": ref, "tenant": "acme", "session": "s1", "agent": "ann", "type": "note", "salience": 0.5,
            "timestamp": ts, "content": content, "content_hash": content_hash(content), **extra}


def jsonl(*lines: dict[str, Any]) -> list[str]:
    return [json.dumps(item) + "\n" for item in lines]


def refs_of(core: MemoryCore, tenant: str = "acme") -> dict[str, str]:
    """content -> ref of the tenant's memories."""
    return {str(line["content"]): str(line["ref"]) for line in export_tenant(core.operator_parts(), tenant)}


# ---- 6. ids ---------------------------------------------------------------------------------------

def test_a_ref_at_the_end_of_the_nameable_range_is_imported_under_a_fresh_ref(store: MemoryCore) -> None:
    store.add_memory("globex", "g1", "zed", "before the import")
    counts = import_lines(store.operator_parts(), jsonl(line("mem:999999999999999999", "the attacker's line"),
                                       line("mem:5", "an ordinary line", "2026-03-01T10:00:01+00:00")), "acme")
    assert (counts.written, counts.remapped, counts.errors) == (2, 1, 0)
    imported = refs_of(store)
    assert imported["an ordinary line"] == "mem:5"
    assert int(imported["the attacker's line"].split(":")[1]) < 1000
    after = store.add_memory("globex", "g1", "zed", "after the import")  # another tenant's next id is unharmed
    assert int(after.ref.split(":")[1]) < 1000
    assert [m.ref for m in store.recall("globex", "after the import").messages][:1] == [after.ref]
    assert len(list(export_tenant(store.operator_parts(), "globex"))) == 2
    assert check_stores(store.operator_parts()).ok


def test_an_entity_ref_at_the_end_of_the_range_is_imported_under_a_fresh_ref(store: MemoryCore) -> None:
    entity = {"ref": "ent:999999999999999999", "name": "Falcon", "kind": "project"}
    counts = import_lines(store.operator_parts(), jsonl(line("mem:3", "falcon ships friday", entities=[entity])),
                          "acme")
    assert (counts.written, counts.entities, counts.errors) == (1, 1, 0)
    [record] = store._graph.entity_records("acme")
    assert record.name == "Falcon" and record.id < 1000
    assert int(store.add_memory("acme", "s1", "ann", "next").ref.split(":")[1]) < 1000


def set_sequence(core: MemoryCore, next_id: int) -> None:
    """The damage an import used to do: the shared id sequence moved to ``next_id``."""
    db = sqlite_db(core)
    if db is not None:
        with db.transaction() as cur:
            cur.execute("UPDATE meta SET value = ? WHERE key = 'next_id'", (str(next_id),))
        return
    import psycopg

    with psycopg.connect(core.settings.storage.postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT setval('item_ids', %s, false)", [next_id])


def test_doctor_reports_an_id_sequence_past_the_nameable_range_and_a_repair_brings_it_back(
        store: MemoryCore) -> None:
    kept = store.add_memory("acme", "s1", "ann", "a memory from before").ref
    set_sequence(store, MAX_ID + 1)
    report = check_stores(store.operator_parts())
    assert [(f.kind, f.tenant) for f in report.findings] == [("id_sequence", "")]
    assert "a ref can name" in report.findings[0].detail
    fixed = repair_stores(store.operator_parts())
    assert fixed.ok and [r.kind for r in fixed.repairs] == ["id_sequence"]
    fresh = store.add_memory("globex", "g1", "zed", "after the repair").ref
    assert int(fresh.split(":")[1]) == int(kept.split(":")[1]) + 1
    assert check_stores(store.operator_parts()).ok


def test_a_row_past_the_nameable_range_is_reported_by_doctor_and_refused_by_export_with_a_code(
        store: MemoryCore) -> None:
    store.add_memory("acme", "s1", "ann", "a nameable memory")
    set_sequence(store, MAX_ID + 1)  # what the unbounded import did: every later row is unnameable
    store.add_memory("acme", "s1", "ann", "a memory nobody can name")
    found = [(f.kind, f.ref) for f in check_stores(store.operator_parts()).findings]
    assert ("id_sequence", None) in found and ("id_unnameable", f"mem:{MAX_ID + 1}") in found
    with pytest.raises(StoreError) as refused:
        list(export_tenant(store.operator_parts(), "acme"))
    assert refused.value.code == "STORE_ERROR" and str(MAX_ID) in refused.value.message
    repaired = repair_stores(store.operator_parts())
    assert [f.kind for f in repaired.remaining or []] == ["id_unnameable"]  # reported, never renumbered
    assert int(store.add_memory("globex", "g", "zed", "next").ref.split(":")[1]) < 1000


def test_doctor_leaves_a_sequence_alone_that_still_has_room(store: MemoryCore) -> None:
    store.add_memory("acme", "s1", "ann", "a memory")
    set_sequence(store, 10**12)
    assert check_stores(store.operator_parts()).ok


# ---- 7. skips and conflicts -------------------------------------------------------------------------

def test_a_line_whose_idempotency_key_names_another_memory_is_refused_and_changes_nothing(
        store: MemoryCore) -> None:
    existing = store.add_memory("acme", "s1", "ann", "the unrelated row", idempotency_key="k1").ref
    attack = line("mem:77", "something else entirely", locked=True, valid_to="2026-03-02T00:00:00+00:00",
                  idempotency_key="k1")
    counts = import_lines(store.operator_parts(), jsonl(attack), "acme")
    assert (counts.written, counts.skipped, counts.states, counts.errors) == (0, 0, 0, 1)
    assert counts.error_lines[0]["code"] == "IDEMPOTENCY_CONFLICT" and existing in counts.error_lines[0]["message"]
    row = store._graph.memory("acme", int(existing.split(":")[1]))
    assert row is not None and (row.locked, row.valid_to_us) == (False, None)
    assert [m.ref for m in store.recall("acme", "the unrelated row").messages] == [existing]


def test_a_line_already_present_is_skipped_without_touching_the_stored_row(store: MemoryCore) -> None:
    existing = store.add_memory("acme", "s1", "ann", "an agreed fact", timestamp=T0).ref
    same = line("mem:900", "an agreed fact", locked=True, valid_to="2026-03-02T00:00:00+00:00")
    counts = import_lines(store.operator_parts(), jsonl(same), "acme")
    assert (counts.written, counts.skipped, counts.states, counts.errors) == (0, 1, 0, 0)
    row = store._graph.memory("acme", int(existing.split(":")[1]))
    assert row is not None and (row.locked, row.valid_to_us) == (False, None)


def test_two_lines_of_one_file_with_one_idempotency_key_write_the_first_and_refuse_the_second(
        store: MemoryCore) -> None:
    counts = import_lines(store.operator_parts(), jsonl(line("mem:1", "first", idempotency_key="k"),
                                       line("mem:2", "second", locked=True, idempotency_key="k")), "acme",
                          skip_bad=True)
    assert (counts.written, counts.errors) == (1, 1)
    assert counts.error_lines[0]["line"] == 2 and counts.error_lines[0]["code"] == "IDEMPOTENCY_CONFLICT"
    row = store._graph.memory("acme", 1)
    assert row is not None and row.locked is False


def test_a_version_chain_imported_in_two_runs_ends_complete(store: MemoryCore) -> None:
    """The first run stops part-way (as a killed import would); the rerun finishes the chain."""
    v1 = line("mem:1", "the port is 8080", valid_to="2026-03-01T11:00:00+00:00")
    v2 = line("mem:2", "the port is 8443", "2026-03-01T11:00:00+00:00", supersedes="mem:1",
              valid_to="2026-03-01T12:00:00+00:00", edges=[{"kind": "SUPERSEDES", "node": "mem:1"}])
    v3 = line("mem:3", "the port is 9443", "2026-03-01T12:00:00+00:00", supersedes="mem:2", locked=True,
              edges=[{"kind": "SUPERSEDES", "node": "mem:2"}])
    import_lines(store.operator_parts(), jsonl(v1, v2), "acme")
    counts = import_lines(store.operator_parts(), jsonl(v1, v2, v3), "acme")
    assert (counts.written, counts.skipped, counts.errors) == (1, 2, 0)
    assert [r.ref for r in store.history("acme", "mem:1")] == ["mem:1", "mem:2", "mem:3"]
    assert [m.ref for m in store.recall("acme", "port").messages] == ["mem:3"]
    assert store._graph.memory("acme", 3).locked is True  # type: ignore[union-attr]
    assert check_stores(store.operator_parts()).ok
    assert_stores_agree(store)


# ---- 8. bytes that are not UTF-8 ----------------------------------------------------------------------

def raw_file(tmp_path: Path) -> Path:
    path = tmp_path / "mixed.jsonl"
    good = [json.dumps(line(f"mem:{i}", f"good line {i}", f"2026-03-01T10:00:0{i}+00:00")).encode() for i in (1, 2, 4)]
    bad = json.dumps(line("mem:3", "bad line")).encode().replace(b"bad line", b"bad \xff\xfe line")
    path.write_bytes(b"\n".join([good[0], good[1], bad, good[2]]) + b"\n")
    return path


def cli(data_dir: Path, *args: str) -> Any:
    return runner.invoke(app, [*args, "--data-dir", str(data_dir), "--json"])


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")


def contents(data_dir: Path) -> list[str]:
    with MemoryCore.open(data_dir, settings=load_settings()) as core:
        return sorted(str(line["content"]) for line in export_tenant(core.operator_parts(), "acme"))


def test_a_line_that_is_not_utf8_stops_the_import_with_a_coded_error_naming_it(
        tmp_path: Path, cli_env: None) -> None:
    data_dir = tmp_path / "data"
    result = cli(data_dir, "import", str(raw_file(tmp_path)), "-t", "acme")
    assert result.exit_code == 1, result.stdout
    out = json.loads(result.stdout)
    assert (out["written"], out["errors"], out["stopped_at"]) == (2, 1, 3)
    assert out["error_lines"][0]["line"] == 3 and out["error_lines"][0]["code"] == "INVALID_INPUT"
    assert "UTF-8" in out["error_lines"][0]["message"]
    assert "Traceback" not in result.stdout + result.stderr
    assert contents(data_dir) == ["good line 1", "good line 2"]


def test_skip_bad_imports_the_lines_after_a_line_that_is_not_utf8(tmp_path: Path, cli_env: None) -> None:
    data_dir = tmp_path / "data"
    result = cli(data_dir, "import", str(raw_file(tmp_path)), "-t", "acme", "--skip-bad")
    assert result.exit_code == 1, result.stdout
    out = json.loads(result.stdout)
    assert (out["written"], out["errors"], out["stopped_at"]) == (3, 1, None)
    assert contents(data_dir) == ["good line 1", "good line 2", "good line 4"]


def test_a_dry_run_of_a_jsonl_file_writes_nothing_and_says_what_it_would_write(store: MemoryCore) -> None:
    v1 = line("mem:1", "the port is 8080", valid_to="2026-03-01T11:00:00+00:00")
    v2 = line("mem:2", "the port is 8443", "2026-03-01T11:00:00+00:00", supersedes="mem:1", locked=True)
    counts = import_lines(store.operator_parts(), jsonl(v1, v2, line("mem:3", "third"), {"bad": 1}), "acme",
                          dry_run=True)
    assert (counts.written, counts.states, counts.errors, counts.stopped_at, counts.dry_run) == (3, 2, 1, None, True)
    assert [s["ref"] for s in counts.sample] == ["mem:1", "mem:2", "mem:3"]
    assert list(export_tenant(store.operator_parts(), "acme")) == []
    import_lines(store.operator_parts(), jsonl(v1, v2), "acme")
    again = import_lines(store.operator_parts(), jsonl(v1, v2, line("mem:3", "third")), "acme", dry_run=True)
    assert (again.written, again.skipped) == (1, 2)


@pytest.mark.slow
def test_the_library_reports_a_line_of_bytes_that_is_not_utf8(store: MemoryCore) -> None:
    lines = [json.dumps(line("mem:1", "fine")).encode() + b"\n", b"\xc3\x28 not utf-8\n"]
    counts = import_lines(store.operator_parts(), lines, "acme")
    assert (counts.written, counts.errors) == (1, 1)
    assert counts.error_lines[0]["line"] == 2 and "UTF-8" in counts.error_lines[0]["message"]


# ---- 9. version chains ---------------------------------------------------------------------------------

def crafted_chains() -> list[str]:
    """A two-row cycle (1 <-> 2), a self-loop (3), a fork (5 and 6 both supersede 4), a fine chain (7 <- 8)."""
    end = {"valid_to": "2026-03-02T00:00:00+00:00"}
    return jsonl(
        line("mem:1", "cycle one", supersedes="mem:2", **end),
        line("mem:2", "cycle two", "2026-03-01T10:00:01+00:00", supersedes="mem:1", **end),
        line("mem:3", "self loop", "2026-03-01T10:00:02+00:00", supersedes="mem:3", **end),
        line("mem:4", "fork root", "2026-03-01T10:00:03+00:00", **end),
        line("mem:5", "fork left", "2026-03-01T10:00:04+00:00", supersedes="mem:4"),
        line("mem:6", "fork right", "2026-03-01T10:00:05+00:00", supersedes="mem:4"),
        line("mem:7", "chain old", "2026-03-01T10:00:06+00:00", **end),
        line("mem:8", "chain new", "2026-03-01T10:00:07+00:00", supersedes="mem:7"),
    )


@pytest.mark.slow
def test_cycles_self_loops_and_forks_in_a_file_are_refused_and_the_rest_imports(store: MemoryCore) -> None:
    counts = import_lines(store.operator_parts(), crafted_chains(), "acme", skip_bad=True)
    refused = {e["line"]: e["message"] for e in counts.error_lines}
    assert sorted(refused) == [1, 2, 3, 6]
    assert "cycle" in refused[1] and "cycle" in refused[2]
    assert "itself" in refused[3] and "mem:5" in refused[6]
    assert sorted(refs_of(store)) == ["chain new", "chain old", "fork left", "fork root"]
    assert [m.content for m in store.recall("acme", "fork").messages] == ["fork left"]
    assert [m.content for m in store.recall("acme", "chain").messages] == ["chain new"]
    assert check_stores(store.operator_parts()).ok


def test_a_version_chain_whose_newer_line_comes_first_imports_whole(store: MemoryCore) -> None:
    new = line("mem:2", "the newer version", "2026-03-01T11:00:00+00:00", supersedes="mem:1")
    old = line("mem:1", "the older version", valid_to="2026-03-01T11:00:00+00:00")
    counts = import_lines(store.operator_parts(), jsonl(new, old), "acme")
    assert (counts.written, counts.errors) == (2, 0)
    assert [r.content for r in store.history("acme", "mem:2")] == ["the older version", "the newer version"]
    assert check_stores(store.operator_parts()).ok


def test_a_file_with_a_fork_stops_at_it_without_skip_bad(tmp_path: Path, cli_env: None) -> None:
    path = tmp_path / "chains.jsonl"
    path.write_text("".join(crafted_chains()[3:]), encoding="utf-8")
    result = cli(tmp_path / "data", "import", str(path), "-t", "acme")
    assert result.exit_code == 1
    out = json.loads(result.stdout)
    assert (out["written"], out["stopped_at"]) == (2, 3)
    assert contents(tmp_path / "data") == ["fork left", "fork root"]


def plant_chains(core: MemoryCore) -> dict[str, int]:
    """The chains a crafted import used to write, planted behind the service's back."""
    ids = {}
    for i, name in enumerate(["cycle a", "cycle b", "self", "fork root", "fork old", "fork new", "plain"]):
        ids[name] = int(core.add_memory("acme", "s1", "ann", f"{name} text", timestamp=f"2026-03-01T10:00:0{i}+00:00"
                                        ).ref.split(":")[1])
    end = 1_772_400_000_000_000
    plan = {"cycle a": ids["cycle b"], "cycle b": ids["cycle a"], "self": ids["self"],
            "fork old": ids["fork root"], "fork new": ids["fork root"]}
    with core._writer.lock, core._graph.transaction() as tx:
        for name, old in plan.items():
            tx.set_memory_state("acme", ids[name], {"supersedes_id": old})
            tx.set_memory_state("acme", old, {"valid_to_us": end})
            tx.write_edge("acme", f"mem:{ids[name]}", f"mem:{old}", "SUPERSEDES")
    core._graph.invalidate()
    return ids


@pytest.mark.slow
def test_doctor_reports_cycles_self_loops_and_forks_and_repairs_each_to_one_chain_newest_first(
        store: MemoryCore) -> None:
    ids = plant_chains(store)
    found = check_stores(store.operator_parts()).findings
    assert sorted((f.kind, f.ref) for f in found) == sorted([
        ("version_cycle", f"mem:{ids['cycle a']}"), ("version_self", f"mem:{ids['self']}"),
        ("version_fork", f"mem:{ids['fork root']}")])
    assert all(f.tenant == "acme" for f in found)
    fixed = repair_stores(store.operator_parts())
    assert fixed.ok, [f.to_dict() for f in fixed.remaining or []]
    assert {r.kind for r in fixed.repairs} == {"version_cycle", "version_self", "version_fork"}
    shown = [m.content for m in store.recall("acme", "", limit=20).messages]
    assert sorted(shown) == ["cycle b text", "fork new text", "plain text", "self text"]
    assert [r.content for r in store.history("acme", f"mem:{ids['fork root']}")] == [
        "fork root text", "fork old text", "fork new text"]
    assert [r.content for r in store.history("acme", f"mem:{ids['cycle a']}")] == ["cycle a text", "cycle b text"]
    assert check_stores(store.operator_parts()).ok
    assert repair_stores(store.operator_parts()).repairs == []
    assert_stores_agree(store)


def test_links_and_keys_of_a_file_never_reach_another_tenants_rows(store: MemoryCore) -> None:
    foreign = store.add_memory("globex", "g1", "zed", "globex's own fact", idempotency_key="k1").ref
    fid = int(foreign.split(":")[1])
    newer = line("mem:50", "a correction of a row the file does not hold", supersedes=foreign,
                 edges=[{"kind": "SUPERSEDES", "node": foreign}], idempotency_key="k1", locked=True)
    counts = import_lines(store.operator_parts(), jsonl(newer), "acme")
    assert (counts.written, counts.errors) == (1, 0)  # globex's key is not acme's
    [row] = list(export_tenant(store.operator_parts(), "acme"))
    assert row["supersedes"] is None and row["locked"] is True
    assert {e["kind"] for e in row["edges"]} == {"AUTHORED_BY", "IN_SESSION"}
    kept = store._graph.memory("globex", fid)
    assert kept is not None and (kept.valid_to_us, kept.locked) == (None, False)
    assert [e for e in store._graph.edges_of("globex", foreign) if e.kind == "SUPERSEDES"] == []
