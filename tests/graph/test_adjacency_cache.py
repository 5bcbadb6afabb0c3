"""Recall's session neighbours are kept between requests (``graph.sqlite.adjacency_cache``) only while their
session is not written: an add or a delete in the session must show at once, a write elsewhere must
not cost the kept answers, and a reset or a forgotten session tick must refuse them."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graph.api import MemoryNode
from graph.sqlite.adjacency_cache import AdjacencyCache
from graph.sqlite.store import SqliteGraphStore
from memory_core import MemoryCore
from tests.support.backends import open_core

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "data", request)
    yield c
    c.close()


def _add(core: MemoryCore, tenant: str, session: str, minutes: list[float]) -> list[int]:
    rows = core.add_memories([{"tenant": tenant, "session": session, "agent": "ann", "type": "turn",
                               "content": f"{session} turn at {m}", "timestamp": T0 + timedelta(minutes=m)}
                              for m in minutes])
    return [int(r.ref[4:]) for r in rows]


def _store(core: MemoryCore) -> SqliteGraphStore:
    assert isinstance(core._graph, SqliteGraphStore)
    return core._graph


def _neighbours(core: MemoryCore, tenant: str, ids: list[int]) -> tuple[dict[int, tuple[int | None, int | None]],
                                                                           int]:
    """(id -> (previous id, next id)) and the number of SELECTs the read ran."""
    store = _store(core)
    statements: list[str] = []
    store.db.conn.set_trace_callback(statements.append)
    try:
        pairs = store.adjacent_many(tenant, store.memories(tenant, ids).values())
    finally:
        store.db.conn.set_trace_callback(None)
    ids_of = {k: (p[1] if p else None, n[1] if n else None) for k, (p, n) in pairs.items()}
    return ids_of, sum(1 for s in statements if "WITH m(id, session, ts_us)" in s)


def test_kept_neighbours_are_reused_until_their_session_is_written(core: MemoryCore) -> None:
    a = _add(core, "acme", "a", [0, 10, 20])
    b = _add(core, "acme", "b", [0, 10])
    first, reads = _neighbours(core, "acme", [a[1], b[0]])
    assert first == {a[1]: (a[0], a[2]), b[0]: (None, b[1])} and reads == 1
    again, reads = _neighbours(core, "acme", [a[1], b[0]])
    assert again == first and reads == 0  # nothing written since: no seek
    _add(core, "acme", "b", [30])  # another session: a's answer is still good
    _again, reads = _neighbours(core, "acme", [a[1]])
    assert reads == 0
    (between,) = _add(core, "acme", "a", [15])  # right after a[1]: its next neighbour changes
    now, reads = _neighbours(core, "acme", [a[1]])
    assert now == {a[1]: (a[0], between)} and reads == 1
    core.delete_memory("acme", f"mem:{between}")
    now, _reads = _neighbours(core, "acme", [a[1]])
    assert now == {a[1]: (a[0], a[2])}


def test_a_delete_of_a_neighbour_shows_at_once(core: MemoryCore) -> None:
    a = _add(core, "acme", "a", [0, 10, 20])
    assert _neighbours(core, "acme", [a[1]])[0] == {a[1]: (a[0], a[2])}
    core.delete_memory("acme", f"mem:{a[0]}")
    assert _neighbours(core, "acme", [a[1]])[0] == {a[1]: (None, a[2])}


def test_another_tenants_session_of_the_same_name_does_not_keep_or_refuse_answers(core: MemoryCore) -> None:
    a = _add(core, "acme", "a", [0, 10, 20])
    other = _add(core, "zeta", "a", [5, 15])
    _neighbours(core, "acme", [a[1]])
    _add(core, "zeta", "a", [12])  # the same session name in another tenant
    kept, reads = _neighbours(core, "acme", [a[1]])
    assert kept == {a[1]: (a[0], a[2])} and reads == 0
    # another tenant's nodes are never answered, kept or not
    store = _store(core)
    assert store.adjacent_many("acme", store.memories("zeta", other).values()) == {}


def test_a_reset_of_the_caches_refuses_every_kept_answer(core: MemoryCore) -> None:
    a = _add(core, "acme", "a", [0, 10, 20])
    _neighbours(core, "acme", [a[1]])
    store = _store(core)
    with sqlite3.connect(store.db.path) as raw:  # changed underneath, as damage or a restored backup does
        raw.execute("DELETE FROM memories WHERE id = ?", (a[0],))
    store.invalidate()
    assert _neighbours(core, "acme", [a[1]]) == ({a[1]: (None, a[2])}, 1)


def _node(mem_id: int, session: str, tenant: str = "acme") -> MemoryNode:
    return MemoryNode(mem_id, tenant, session, "ann", "turn", None, None, {}, None, None, 0.5, "tenant",
                      mem_id, {}, 1, "h")


def test_a_session_whose_tick_was_forgotten_refuses_the_answers_read_before() -> None:
    cache = AdjacencyCache(capacity=100, sessions_kept=2)
    x, y = _node(1, "x"), _node(2, "y")
    tick = cache.tick()
    cache.put_many(tick, [x, y], {1: (None, (5, 5)), 2: ((3, 3), None)})
    assert cache.get_many("acme", [x, y]) == ({1: (None, (5, 5)), 2: ((3, 3), None)}, [])
    cache.written([("acme", "p")])
    cache.written([("acme", "q")])
    assert cache.get_many("acme", [x])[1] == []  # still two sessions kept: x was never written
    cache.written([("acme", "r")])  # p falls out: its tick is the floor now, newer than x's read
    found, missing = cache.get_many("acme", [x, y])
    assert found == {} and missing == [x, y]
    assert cache.get_many("zeta", [x]) == ({}, [])  # another tenant's node is not even asked for
