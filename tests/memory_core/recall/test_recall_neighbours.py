"""Recall's neighbour join (``memory_core.recall.neighbours.link``): which pool rows link to the turn right
before and after them in their session, which absent neighbours join the pool, and what it reads.

A row can link only to the pool row right beside it in its session, so the join reads the session
neighbours of the seeds (their absent neighbours join) and of the dialogue rows that share their
session with another pool row, and of no other row."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from graph.api import MemoryNode
from memory_core import MemoryCore
from memory_core.recall.filters import UNSET, RecallFilters, resolve_project
from memory_core.recall.neighbours import link
from memory_core.recall.pool import Candidate
from tests.support.backends import open_core

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "data", request)
    yield c
    c.close()


def _session(core: MemoryCore, session: str, n: int, start: int) -> list[int]:
    rows = core.add_memories([{"tenant": "acme", "session": session, "agent": "ann", "type": "turn",
                               "content": f"{session} turn {i}", "timestamp": T0 + timedelta(minutes=start + i)}
                              for i in range(n)])
    return [int(r.ref[4:]) for r in rows]


def test_pool_rows_link_to_pool_rows_beside_them_and_only_seeds_pull_in_absent_neighbours(
        core: MemoryCore, monkeypatch: pytest.MonkeyPatch) -> None:
    a = _session(core, "a", 5, 0)  # a[1], a[2] in the pool, side by side; neither a seed
    b = _session(core, "b", 5, 10)  # b[2] alone in the pool, not a seed: nothing to link to
    c = _session(core, "c", 5, 20)  # c[2] alone in the pool, a seed: its neighbours join
    pool = [a[1], a[2], b[2], c[2]]
    graph = core._graph
    asked: list[int] = []
    adjacent_many = graph.adjacent_many

    def spy(tenant: str, nodes: Iterable[MemoryNode]) -> Any:
        nodes = list(nodes)
        asked.extend(n.id for n in nodes)
        return adjacent_many(tenant, nodes)

    monkeypatch.setattr(graph, "adjacent_many", spy)
    filters = RecallFilters.build("acme", None, resolve_project(UNSET, None, ()))
    attrs = dict(graph.memories("acme", pool))
    cands = {i: Candidate(i, dialogue=True, base=1.0) for i in pool}
    link(graph, cands, {c[2]}, attrs, filters)

    assert cands[a[2]].prev == a[1] and cands[a[1]].next == a[2]
    assert cands[a[1]].prev is None and cands[a[2]].next is None  # a[0], a[3]: not in the pool, not a seed's
    assert cands[b[2]].prev is None and cands[b[2]].next is None
    assert {k for k, v in cands.items() if v.neighbour_of == c[2]} == {c[1], c[3]}
    assert cands[c[2]].prev == c[1] and cands[c[2]].next == c[3]
    assert sorted(asked) == sorted([a[1], a[2], c[2]])  # b[2] could link to nothing: not read


def test_a_neighbour_of_another_tenant_or_session_is_never_linked(core: MemoryCore) -> None:
    mine = _session(core, "s", 3, 0)
    core.add_memories([{"tenant": "other", "session": "s", "agent": "ann", "type": "turn",
                        "content": "other tenant", "timestamp": T0 + timedelta(minutes=1, seconds=30)}])
    graph = core._graph
    filters = RecallFilters.build("acme", None, resolve_project(UNSET, None, ()))
    attrs = dict(graph.memories("acme", [mine[1]]))
    cands = {mine[1]: Candidate(mine[1], dialogue=True, base=1.0)}
    link(graph, cands, {mine[1]}, attrs, filters)
    assert sorted(cands) == sorted(mine)  # its own session's turns, none of the other tenant's
