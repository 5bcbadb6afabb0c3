"""Recall's lexical search reads a snapshot of its own (graph.sqlite.readers), so it never waits
for the writer's lock: a long write transaction does not hold it up, and what that transaction
has not committed (rows, or a new tenant's tables) is not seen."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from graph.api import RowFilter
from graph.sqlite.store import SqliteGraphStore
from memory_core import MemoryCore
from tests.support.backends import open_core


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "data", request)  # the SQLite graph store, whatever the suite's backends
    yield c
    c.close()


def _store(core: MemoryCore) -> SqliteGraphStore:
    assert isinstance(core._graph, SqliteGraphStore)
    return core._graph


def _search_while_writing(core: MemoryCore, tenant: str, terms: list[str], during: object) -> list[int]:
    """A lexical search from another thread while this thread sits inside a write transaction."""
    store = _store(core)
    entered, release = threading.Event(), threading.Event()

    def write() -> None:
        with store.db.transaction() as cur:
            if callable(during):
                during(cur)
            entered.set()
            release.wait(10)

    with ThreadPoolExecutor(2) as pool:
        writer = pool.submit(write)
        assert entered.wait(5)
        try:
            search = pool.submit(store.lexical_window, RowFilter(tenant), terms, 10)
            hits = search.result(timeout=5)  # blocked on the writer's lock before: a timeout here
        finally:
            release.set()
        writer.result(timeout=10)
    return [h.id for h in hits]


def test_a_lexical_search_does_not_wait_for_a_write_transaction(core: MemoryCore) -> None:
    ref = core.add_memory("t", "s", "ann", "the kiln firing schedule moved to thursday").ref
    assert _search_while_writing(core, "t", ["kiln"], None) == [int(ref[4:])]


def test_rows_a_write_has_not_committed_are_not_seen(core: MemoryCore) -> None:
    ref = core.add_memory("t", "s", "ann", "the kiln is hot").ref
    table = _store(core).db.window_table(None, "t", create=False)

    def uncommitted(cur: object) -> None:
        cur.execute(f"INSERT INTO {table} (rowid, content, prev) VALUES (999999, 'kiln glaze', '')")  # type: ignore[attr-defined]

    assert _search_while_writing(core, "t", ["kiln"], uncommitted) == [int(ref[4:])]


def test_a_new_tenants_uncommitted_tables_read_as_empty_not_as_an_error(core: MemoryCore) -> None:
    core.add_memory("t", "s", "ann", "something else")

    def create(cur: object) -> None:
        _store(core).db.fts_table(cur, "fresh", create=True)  # type: ignore[arg-type]

    assert _search_while_writing(core, "fresh", ["kiln"], create) == []


def test_after_close_a_search_fails_as_a_store_error(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    c = open_core("memory", tmp_path / "d", request)
    c.add_memory("t", "s", "ann", "kiln")
    store = _store(c)
    c.close()
    from graph.api import GraphStoreError

    with pytest.raises(GraphStoreError):
        store.lexical_window(RowFilter("t"), ["kiln"], 10)
