"""Entity mention counts on SQLite: kept in the ``counts`` table by the mention writes themselves,
so reading how many memories a viewer sees mention an entity costs the same for an entity with
50 mentions as for one with 5,000 (recall's entity branch asks it for every entity of the query
and of its best rows), and stays equal to a recount through adds, private rows, merges, erased
links, deletes and an upgrade from a store that had no such counts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.sqlite.db import GraphDB
from graph.sqlite.maintenance import SqliteMaintenance
from graph.sqlite.migrations import COUNT_SCOPES_SQL, SCHEMA_VERSION
from graph.sqlite.store import SqliteGraphStore
from tests.support.entity_counts import add_mentioning, agree, follow_the_writes
from tests.support.sqlite import vm_steps


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteGraphStore]:
    s = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    yield s
    s.close()


def _visible(store: SqliteGraphStore, tenant: str, entity_id: int, viewer: str | None) -> int:
    """The count straight from the mention rows (what the kept count must equal)."""
    with store.db.lock:
        found = store.db.conn.execute(
            "SELECT count(*) FROM mentions WHERE tenant = ? AND entity_id = ? AND (shared = 1 OR agent = ?)",
            (tenant, entity_id, "\x00" if viewer is None else viewer)).fetchone()
    return int(found[0])


def _entity_ids(store: SqliteGraphStore, tenant: str = "acme") -> list[int]:
    with store.db.lock:
        return [int(r[0]) for r in store.db.conn.execute("SELECT id FROM entities WHERE tenant = ?", (tenant,))]


def _agree(store: SqliteGraphStore, tenant: str = "acme") -> None:
    agree(store, tenant, _entity_ids(store, tenant), lambda e, viewer: _visible(store, tenant, e, viewer),
          SqliteMaintenance(store.db).stale_counts)


@pytest.mark.slow
def test_counting_an_entitys_mentions_does_not_grow_with_them(store: SqliteGraphStore) -> None:
    for i in range(5_000):
        add_mentioning(store, ["Hub"] + (["Rare"] if i < 50 else []), agent=f"a{i % 4}", private=i % 10 == 0)
    hub = store.entity_ids("acme", ["hub"])["hub"]
    rare = store.entity_ids("acme", ["rare"])["rare"]
    assert store.entity_mention_counts("acme", [hub, rare], "a1", 100_000) == {
        hub: _visible(store, "acme", hub, "a1"), rare: _visible(store, "acme", rare, "a1")}
    reads = {"entity_mention_counts": lambda e: store.entity_mention_counts("acme", [e], "a1", 100_000),
             "entity": lambda e: store.entity("acme", e, "a1")}
    for name, read in reads.items():
        small, _ = vm_steps(store.db, lambda: read(rare), 100)  # noqa: B023 (called at once)
        big, _ = vm_steps(store.db, lambda: read(hub), 100)  # noqa: B023
        # counted from the index, the 4,5xx entries the hub has for a1 took ~100 times the steps
        assert big <= small + 2, (name, small, big)


@pytest.mark.slow
def test_listing_a_tenants_entities_does_not_grow_with_their_mentions(tmp_path: Path) -> None:
    steps = []
    for n in (50, 2_000):
        s = SqliteGraphStore(GraphDB(tmp_path / f"{n}.sqlite3"))
        try:
            for i in range(n):
                add_mentioning(s, ["Hub", f"Thing {i % 3}"], agent=f"a{i % 4}", private=i % 10 == 0)
            listed = s.entities("acme", "a1")
            assert [(e.name, e.mentions) for e in listed] == [
                ("Hub", _visible(s, "acme", listed[0].id, "a1")),
                *sorted(((e.name, _visible(s, "acme", e.id, "a1")) for e in listed[1:]), key=lambda p: (-p[1], p[0]))]
            steps.append(vm_steps(s.db, lambda: s.entities("acme", "a1"), 100)[0])  # noqa: B023 (called at once)
        finally:
            s.close()
    assert steps[1] <= steps[0] + 2, steps  # counting the index: 4 times the entries, 4 times the steps


def test_kept_counts_follow_adds_private_rows_merges_erased_links_deletes_and_restores(
        store: SqliteGraphStore) -> None:
    follow_the_writes(store, lambda tenant: _agree(store, tenant))


def test_a_store_from_before_kept_mention_counts_is_upgraded_with_them(tmp_path: Path) -> None:
    path = tmp_path / "graph.sqlite3"
    old = SqliteGraphStore(GraphDB(path))
    for i in range(30):
        add_mentioning(old, ["Alice", f"Thing {i % 4}"], agent=f"a{i % 3}", private=i % 5 == 0)
    old.close()
    with sqlite3.connect(path) as conn:  # as version 6 left it: no triggers, no mention counts
        conn.execute("DROP TRIGGER mentions_counted")
        conn.execute("DROP TRIGGER mentions_uncounted")
        conn.execute("DELETE FROM counts WHERE scope = 'mention'")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    store = SqliteGraphStore(GraphDB(path))
    try:
        assert store.db.meta("schema_version") == str(SCHEMA_VERSION)
        _agree(store)
        add_mentioning(store, ["Alice"], agent="a1", private=True)  # and the upgraded store keeps them from then on
        _agree(store)
        with store.db.lock:
            recount = {tuple(r) for r in store.db.conn.execute(COUNT_SCOPES_SQL) if r[1] == "mention"}
        assert len(recount) > 4
    finally:
        store.close()
