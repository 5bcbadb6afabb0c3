"""graph.sqlite.maintenance: the scans doctor, export/import and the operator views use, on a real
SQLite store — tenant-scoped reads, frozen values, and failures as GraphStoreError by result code."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.api import GraphStoreError
from graph.maintenance_api import EdgeRow, MissingStructure, NodeRow
from graph.sqlite.db import GraphDB, window_table_name
from graph.sqlite.maintenance import SqliteMaintenance
from memory_core import MemoryCore
from memory_core.errors import StoreFullError, StoreReadOnlyError
from memory_core.operator.doctor.run import check_stores, repair_stores
from tests.support.backends import open_core
from tests.support.sqlite import sqlite_db


@pytest.fixture
def mcore(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "data", request)
    yield c
    c.close()


def populate(core: MemoryCore) -> dict[str, list[int]]:
    ids: dict[str, list[int]] = {"acme": [], "globex": []}
    for n in range(3):
        for tenant in ids:
            ref = core.add_memory(tenant, "s1", "alice", f"{tenant} note {n} about plums", idempotency_key=f"k{n}").ref
            ids[tenant].append(int(ref.split(":")[1]))
    core.add_memory("acme", "s2", "bob", "a private thought", visibility="agent", type="note")
    return ids


def test_memory_reads_of_one_tenant_never_return_another_tenants_rows(mcore: MemoryCore) -> None:
    ids = populate(mcore)
    m = mcore.operator_parts().maintenance
    assert [r.node.tenant for r in m.memory_rows("acme")] == ["acme"] * 4
    assert m.memory_rows("acme", ids["globex"]) == []
    assert m.idempotency_keys("acme", ids["globex"]) == {}
    assert set(m.idempotency_keys("acme", ids["acme"])) == set(ids["acme"])
    foreign = m.memory_rows("globex", ids["globex"][:1])[0].node
    assert m.existing_memory("globex", foreign.session, foreign.content_hash, foreign.ts_us) == foreign.id
    assert m.existing_memory("acme", foreign.session, foreign.content_hash, foreign.ts_us) is None


def test_stored_rows_carry_content_and_key_and_are_frozen(mcore: MemoryCore) -> None:
    populate(mcore)
    row = mcore.operator_parts().maintenance.memory_rows("acme")[0]
    assert (row.content, row.idempotency_key, row.node.agent) == ("acme note 0 about plums", "k0", "alice")
    assert row.as_row()["content"] == row.content and row.as_row()["id"] == row.node.id
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.content = "changed"  # type: ignore[misc]


def test_a_tenant_named_only_by_a_stray_edge_is_listed_and_doctor_removes_the_edge(mcore: MemoryCore) -> None:
    populate(mcore)
    with sqlite_db(mcore).transaction() as cur:  # a leak: an edge of a tenant that has nothing else
        cur.execute("INSERT INTO edges VALUES ('mem:1', 'agent:ghost/x', 'AUTHORED_BY', 'ghost')")
    assert "ghost" in mcore.operator_parts().maintenance.tenants_present()
    found = [(f.kind, f.tenant) for f in check_stores(mcore.operator_parts()).findings]
    assert found == [("dangling_edge", "ghost")]
    assert repair_stores(mcore.operator_parts()).ok
    assert EdgeRow("mem:1", "agent:ghost/x", "AUTHORED_BY", "ghost") not in mcore.operator_parts().maintenance.edges()


def test_missing_structure_is_listed_once_and_recreated(mcore: MemoryCore) -> None:
    populate(mcore)
    with sqlite_db(mcore).transaction() as cur:
        cur.execute("DELETE FROM nodes WHERE node_id = 'agent:acme/alice'")
    missing = mcore.operator_parts().maintenance.missing_structure()
    assert missing == [MissingStructure("acme", "mem:1", node=NodeRow("agent:acme/alice", "AGENT", "acme",
                                                                     {"agent": "alice"}))]
    mcore.operator_parts().maintenance.create_structure(missing)
    assert mcore.operator_parts().maintenance.missing_structure() == []
    nodes = mcore.operator_parts().maintenance.nodes()
    assert NodeRow("agent:acme/alice", "AGENT", "acme", {"agent": "alice"}) in nodes


def test_a_damaged_window_index_is_found_by_its_result_code_and_rebuilt(mcore: MemoryCore) -> None:
    ids = populate(mcore)
    name = window_table_name("acme")
    with sqlite_db(mcore).transaction() as cur:  # the stored text no longer matches what FTS5 indexed
        cur.execute(f"UPDATE {name}_content SET c0 = 'zebra' WHERE id = ?", (ids["acme"][1],))
    state = mcore.operator_parts().maintenance.window_state("acme")
    assert state.present and state.damaged is not None and state.damaged.startswith("SQLITE_CORRUPT")
    findings = check_stores(mcore.operator_parts()).findings
    assert [(f.kind, f.tenant, f.ref) for f in findings] == [("lexical_stale", "acme", None)]
    report = repair_stores(mcore.operator_parts())
    assert report.ok and [(r.kind, r.tenant) for r in report.repairs] == [("lexical", "acme")]
    assert mcore.operator_parts().maintenance.window_state("acme").damaged is None


def test_a_write_refused_by_a_read_only_store_is_read_only_and_doctor_says_store_read_only(
    mcore: MemoryCore,
) -> None:
    populate(mcore)
    with sqlite_db(mcore).transaction() as cur:
        cur.execute("INSERT INTO edges VALUES ('mem:1', 'mem:999', 'SUPERSEDES', 'acme')")
    sqlite_db(mcore).conn.execute("PRAGMA query_only = ON")  # SQLite itself refuses every write now
    try:
        with pytest.raises(GraphStoreError) as caught:
            mcore.operator_parts().maintenance.remove_edges([EdgeRow("mem:1", "mem:999", "SUPERSEDES", "acme")])
        assert caught.value.kind == "read_only"
        assert isinstance(caught.value.cause, sqlite3.Error) and caught.value.cause.sqlite_errorcode & 0xFF == 8
        with pytest.raises(StoreReadOnlyError) as coded:
            repair_stores(mcore.operator_parts())
        assert coded.value.code == "STORE_READ_ONLY"
    finally:
        sqlite_db(mcore).conn.execute("PRAGMA query_only = OFF")
    edges = mcore.operator_parts().maintenance.edges()
    assert EdgeRow("mem:1", "mem:999", "SUPERSEDES", "acme") in edges  # nothing half-done


def test_a_write_into_a_full_store_is_full_and_nothing_is_written(tmp_path: Path) -> None:
    db = GraphDB(tmp_path / "graph.sqlite3")
    try:
        pages = db.conn.execute("PRAGMA page_count").fetchone()[0]
        db.conn.execute(f"PRAGMA max_page_count = {pages}")  # the file may not grow: SQLITE_FULL
        items = [MissingStructure("acme", f"mem:{i}", node=NodeRow(f"agent:acme/{'a' * 200}{i}", "AGENT", "acme",
                                                                    {"agent": "a" * 2000}))
                 for i in range(200)]
        with pytest.raises(GraphStoreError) as caught:
            SqliteMaintenance(db).create_structure(items)
        assert caught.value.kind == "full"
        assert SqliteMaintenance(db).nodes() == []
    finally:
        db.close()


@pytest.mark.slow
def test_a_full_store_reaches_the_operator_as_store_full_and_nothing_is_written(mcore: MemoryCore) -> None:
    for n in range(120):  # enough AGENT nodes that recreating them needs new pages
        mcore.add_memory("acme", "s1", f"agent-{n:03d}-" + "x" * 40, f"note {n}")
    with sqlite_db(mcore).transaction() as cur:
        cur.execute("DELETE FROM nodes WHERE kind = 'AGENT'")
    with sqlite_db(mcore).lock:
        sqlite_db(mcore).conn.execute("VACUUM")  # no free page left inside the file
        pages = sqlite_db(mcore).conn.execute("PRAGMA page_count").fetchone()[0]
        sqlite_db(mcore).conn.execute(f"PRAGMA max_page_count = {pages}")  # and the file may not grow
    with pytest.raises(StoreFullError) as coded:
        repair_stores(mcore.operator_parts())
    assert coded.value.code == "STORE_FULL"
    assert [n for n in mcore.operator_parts().maintenance.nodes() if n.kind == "AGENT"] == []


def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    db = GraphDB(tmp_path / "graph.sqlite3")
    db.close()
    with pytest.raises(GraphStoreError) as caught:
        SqliteMaintenance(db).journal()
    assert caught.value.kind == "unavailable"


def test_disk_use_measures_the_database_file(mcore: MemoryCore) -> None:
    use = mcore.operator_parts().maintenance.disk_use()
    assert use.database == sqlite_db(mcore).path.stat().st_size > 0


def test_content_chars_are_counted_per_tenant(mcore: MemoryCore) -> None:
    populate(mcore)
    chars = mcore.operator_parts().maintenance.content_chars()
    maintenance = mcore.operator_parts().maintenance
    assert chars == {t: sum(len(r.content) for r in maintenance.memory_rows(t)) for t in ("acme", "globex")}
