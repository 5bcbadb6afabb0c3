"""Each backend is its concerns composed: one class per narrow Protocol of graph.api, in a module of
the same name in graph/sqlite and graph/pg, and every read of the store is its concern's own method
(bound, not copied), with the caches the concerns share held once."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import pytest

from graph import api
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore

# each narrow Protocol of the seam, and the module that implements it in every backend
CONCERNS: dict[type, str] = {
    api.MemoryRows: "memory_rows", api.EpisodeRows: "episode_rows", api.Timeline: "timeline", api.Counts: "counts",
    api.FieldIndex: "field_index", api.EdgeIndex: "edge_index", api.EntityIndex: "entity_index",
    api.TenantIndex: "tenant_index", api.LexicalSearch: "lexical", api.Journal: "journal",
}
BACKENDS = ("graph.sqlite", "graph.pg")


def members(protocol: type) -> list[str]:
    return [name for name, value in vars(protocol).items() if inspect.isfunction(value) and not name.startswith("_")]


def test_the_store_protocol_is_the_concerns_and_the_lifecycle() -> None:
    assert set(api.GraphStore.__bases__) - {Protocol} == {*CONCERNS, api.StoreLifecycle}


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_implements_each_concern_in_the_module_of_its_name(backend: str) -> None:
    for protocol, module in CONCERNS.items():
        name = f"{backend}.{module}"
        found = [c for c in vars(importlib.import_module(name)).values()
                 if inspect.isclass(c) and c.__module__ == name and protocol in c.__mro__]
        assert len(found) == 1, (backend, module, found)


def _bound_to_concerns(store: Any) -> Iterator[tuple[str, str, str]]:
    """(method, the concern it should belong to, the object it is bound to) for every concern read."""
    for protocol, module in CONCERNS.items():
        concern = getattr(store, "journal_log" if module == "journal" else module)
        assert protocol in type(concern).__mro__
        for name in members(protocol):
            method = getattr(store, name)
            yield name, module, "concern" if getattr(method, "__self__", None) is concern else repr(method)


def test_every_read_of_the_sqlite_store_is_its_concerns_own_and_shared_caches_are_one(tmp_path: Path) -> None:
    store = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    try:
        assert [(n, m, o) for n, m, o in _bound_to_concerns(store) if o != "concern"] == []
        assert store.memory_rows.timeline is store.timeline and store.counts.timeline is store.timeline
        assert store.field_index.counts is store.counts and store.edge_index.graph is store
        assert store.lexical.db is store.db
    finally:
        store.close()


@pytest.mark.postgres
def test_every_read_of_the_postgres_store_is_its_concerns_own_and_shared_caches_are_one(dsn: str) -> None:
    from graph.pg import PostgresGraphStore

    with PostgresGraphStore(dsn, owner="concerns") as store:
        assert [(n, m, o) for n, m, o in _bound_to_concerns(store) if o != "concern"] == []
        cached = (store.memory_rows, store.timeline, store.counts, store.tenant_index)
        assert all(c.cache is store.cache for c in cached)  # one versioned cache, not one each
        assert store.memory_rows.timeline is store.timeline and store.field_index.counts is store.counts
        assert store.edge_index.graph is store
        assert {c.q for c in (*cached, store.episode_rows, store.field_index, store.edge_index, store.entity_index,
                              store.lexical, store.journal_log)} == {store.queries}
