"""Recall's entity hop reads the entities of its ~10 best rows (``memory_entities``); that read
must cost what those rows hold, not what the tenant holds. SQLite's planner took the tenant
index of ``mentions`` for it and scanned every mention of the tenant (19 ms at 10k memories
with ~15 identifiers each, 200 ms at 100k), so it is held to O(rows asked) here by counting
SQLite's virtual-machine steps, not by a clock."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from graph.sqlite.store import SqliteGraphStore
from memory_core import MemoryCore
from tests.support.backends import open_core
from tests.support.sqlite import vm_steps


def _fill(core: MemoryCore, tenant: str, n: int) -> list[int]:
    refs = [r.ref for start in range(0, n, 500) for r in core.add_memories([
        {"tenant": tenant, "session": f"s{i // 100}", "agent": "ann",
         "content": f"Turn {i}: build-{i} failed on host-{i % 7} with err-{i % 13} (see PROJ-{i % 50})"}
        for i in range(start, min(n, start + 500))])]
    return [int(r[4:]) for r in refs]


@pytest.mark.slow
def test_a_memorys_entities_are_read_by_its_key_whatever_the_tenants_size(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request)
    try:
        small, big = _fill(core, "small", 20), _fill(core, "big", 2000)
        store = core._graph
        assert isinstance(store, SqliteGraphStore)
        small_steps, small_found = vm_steps(store.db, lambda: store.memory_entities("small", small[:10]), 10)
        big_steps, big_found = vm_steps(store.db, lambda: store.memory_entities("big", big[:10]), 10)
        assert set(small_found) == set(small[:10]) and set(big_found) == set(big[:10])
        assert all(len(ents) >= 4 for ents in big_found.values())  # Turn, build-N, host-N, err-N, PROJ-N
        assert big_steps < 3 * small_steps + 50, (small_steps, big_steps)  # was ~100x: a scan of the tenant
        assert store.memory_entities("small", big[:10]) == {}  # another tenant's rows read as missing
    finally:
        core.close()


def _plans(store: SqliteGraphStore, read: Callable[[], object]) -> list[str]:
    """The query plan of every statement ``read`` runs (traced with its values bound)."""
    statements: list[str] = []
    conn = store.db.conn
    conn.set_trace_callback(statements.append)
    try:
        read()
    finally:
        conn.set_trace_callback(None)
    return [" / ".join(str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
            for sql in statements if sql.lstrip().upper().startswith("SELECT")]


def test_an_entitys_mention_count_reads_the_kept_counts_not_the_mentions(tmp_path: Path,
                                                                         request: pytest.FixtureRequest) -> None:
    """``entity()`` counts the viewer's visible mentions. Counted off ``mentions_entity`` each mention
    cost a lookup of its row for ``shared``/``agent`` (2 ms for a 1,000-mention entity at 100k
    memories, read by recall's entity branch for every entity the query names); off the covering
    listing index still one step per mention. The count is now kept (schema step 7): two keys of
    ``counts``, and no mention is read."""
    core = open_core("memory", tmp_path / "data", request)
    try:
        _fill(core, "big", 300)
        store = core._graph
        assert isinstance(store, SqliteGraphStore)
        ent_id = store.entity_ids("big", ["PROJ-7"])["PROJ-7"]
        node = store.entity("big", ent_id, None)
        assert node is not None and node.mentions == 6  # PROJ-7 in turns 7, 57, ..., 257
        _fill(core, "small", 20)
        assert store.entity("small", ent_id, None) is None  # another tenant's entity reads as missing
        plans = _plans(store, lambda: store.entity("big", ent_id, None))
        assert not [p for p in plans if "mentions" in p], plans
        assert [p for p in plans if "SEARCH c USING PRIMARY KEY (tenant=? AND scope=? AND key=?)" in p], plans
    finally:
        core.close()
