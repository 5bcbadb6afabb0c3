"""Entities in the graph store, on SQLite and PostgreSQL: names and aliases resolve to one entity,
mentions and relations follow the writing memory's visibility, merges move everything, deletes
leave nothing dangling, and both backends answer every entity read alike."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph.api import EntityRecord, EntityRelation, EntitySpec, GraphStore, RelationSpec
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from tests.support.backends import graph_backends
from tests.support.pg_graph import row


@pytest.fixture(params=graph_backends())
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    if request.param == "sqlite":
        s: Any = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    else:
        from graph.pg import PostgresGraphStore
        from testbed.postgres import fresh_database

        s = PostgresGraphStore(fresh_database(request.getfixturevalue("postgres_dsn")), owner="ent", retry_s=2.0)
    yield s
    s.close()


def _add(store: GraphStore, content: str, entities: list[EntitySpec], relations: tuple[RelationSpec, ...] = (),
         **kw: Any) -> tuple[int, list[int]]:
    with store.transaction() as tx:
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, content, **kw))
        return mem_id, tx.link_entities(kw.get("tenant", "acme"), mem_id, entities, list(relations), 7)


def test_a_name_and_its_aliases_resolve_to_one_entity_whatever_the_case_and_spacing(store: GraphStore) -> None:
    _m1, (api,) = _add(store, "a", [EntitySpec("Payments API", "service", ("payments-api",))])
    _m2, again = _add(store, "b", [EntitySpec("  PAYMENTS-API "), EntitySpec("payments\tapi")])
    assert again == [api]
    found = store.entity_by_name("acme", "Payments   api", None)
    assert found is not None and found.id == api and found.kind == "service" and found.mentions == 2
    assert found.aliases == ("Payments API", "payments-api") and found.ref == f"ent:{api}"


def test_an_entity_seen_only_in_private_memories_is_visible_only_to_their_author(store: GraphStore) -> None:
    m1, (secret,) = _add(store, "a", [EntitySpec("Project Falcon")], visibility="agent", agent="ann")
    assert store.entity("acme", secret, None) is None and store.entity("acme", secret, "bob") is None
    assert store.entity_by_name("acme", "project falcon", "bob") is None
    assert [e.id for e in store.entities("acme", "ann")] == [secret]
    assert store.entities("acme", "bob") == [] and store.entity_mentions("acme", [secret], "bob") == {}
    m2, _ = _add(store, "b", [EntitySpec("Project Falcon")])
    assert store.entity_mentions("acme", [secret], "bob") == {secret: [m2]}
    assert store.entity_mentions("acme", [secret], "ann") == {secret: [m2, m1]}


def test_another_tenant_never_sees_or_resolves_an_entity(store: GraphStore) -> None:
    _m, (api,) = _add(store, "a", [EntitySpec("Payments API")])
    _g, (theirs,) = _add(store, "b", [EntitySpec("Payments API")], tenant="globex")
    assert theirs != api
    assert store.entity("globex", api, None) is None and store.entities("nobody", None) == []
    with store.transaction() as tx:
        assert not tx.merge_entities("acme", api, theirs)


def test_relations_resolve_their_ends_and_the_memory_mentions_both(store: GraphStore) -> None:
    m1, ids = _add(store, "a", [EntitySpec("Alice", "person")], (RelationSpec("alice", "Payments API", "owns"),))
    alice, api = ids
    assert store.entity_relations("acme", [api], None) == [EntityRelation(alice, api, "owns", m1)]
    assert store.memory_entities("acme", [m1]) == {m1: sorted(ids)}
    assert store.entity_by_name("acme", "payments api", None) is not None


def test_a_merge_moves_aliases_mentions_and_relations_onto_the_kept_entity(store: GraphStore) -> None:
    m1, (pay, bob) = _add(store, "a", [EntitySpec("Payments"), EntitySpec("Bob")],
                          (RelationSpec("Bob", "Payments", "runs"),))
    m2, (api, _) = _add(store, "b", [EntitySpec("Payments API", "service")],
                        (RelationSpec("Payments API", "Payments", "is"),))
    with store.transaction() as tx:
        assert tx.merge_entities("acme", pay, api)
    kept = store.entity("acme", pay, None)
    assert kept is not None and kept.aliases == ("Payments", "Payments API") and kept.kind == "service"
    assert kept.mentions == 2 and store.entity("acme", api, None) is None
    assert store.entity_relations("acme", [pay], None) == [EntityRelation(bob, pay, "runs", m1)]  # the self-loop went
    assert _add(store, "c", [EntitySpec("payments api")])[1] == [pay]
    assert store.entity_mentions("acme", [pay], None)[pay][-2:] == [m2, m1]


def test_deleting_a_memory_removes_its_mentions_and_relations_and_the_entity_stays_resolvable(
        store: GraphStore) -> None:
    m1, (alice, api) = _add(store, "a", [EntitySpec("Alice")], (RelationSpec("Alice", "API", "owns"),))
    with store.transaction() as tx:
        assert tx.erase_memory("acme", m1)
    assert store.all_mentions("acme") == [] and store.all_relations("acme") == []
    assert store.entity("acme", alice, None) is None  # nothing visible mentions it
    assert [r.id for r in store.entity_records("acme")] == [alice, api]
    assert _add(store, "b", [EntitySpec("alice")])[1] == [alice]


def test_a_restored_entity_keeps_its_id_and_a_second_restore_writes_nothing(store: GraphStore) -> None:
    with store.transaction() as tx:
        tx.reserve_ids_through(100)
        tx.write_memory(row(5, "a"))
    record = EntityRecord(40, "Payments API", "service", ("Payments API", "pay"), 3)
    for expected in (True, False):
        with store.transaction() as tx:
            assert tx.restore_entity("acme", record) is expected
            assert tx.restore_mentions("acme", 5, [40]) == int(expected)
            assert tx.restore_relations("acme", [EntityRelation(40, 40, "x", 5)]) == 0
    assert store.entity_records("acme") == [record] and store.all_mentions("acme") == [(5, 40)]
    with store.transaction() as tx:
        assert tx.id_in_use(40)


def _entity_reads(s: GraphStore) -> dict[str, Any]:
    ids = [r.id for r in s.entity_records("acme")]
    return {
        "records": s.entity_records("acme"), "mentions": s.all_mentions("acme"), "relations": s.all_relations("acme"),
        "entity": [s.entity("acme", i, v) for i in ids for v in (None, "ann", "bob")],
        "by_name": [s.entity_by_name("acme", n, v) for n in ("ALICE", "api", "zz") for v in (None, "ann")],
        "entities": [s.entities("acme", v, limit=lim, kind=k) for v in (None, "ann") for lim in (None, 1)
                     for k in (None, "person")],
        "entity_mentions": [s.entity_mentions("acme", ids, v, lim) for v in (None, "ann") for lim in (None, 1)],
        "memory_entities": s.memory_entities("acme", range(0, 40)),
        "entity_relations": [s.entity_relations("acme", ids[:2], v) for v in (None, "ann", "bob")],
    }


def test_postgres_answers_every_entity_read_as_sqlite_does(tmp_path: Path, postgres_dsn: str) -> None:
    from graph.pg import PostgresGraphStore
    from testbed.postgres import fresh_database

    lite = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    pg = PostgresGraphStore(fresh_database(postgres_dsn), owner="parity", retry_s=2.0)
    try:
        for s in (lite, pg):
            _add(s, "a", [EntitySpec("Alice", "person", ("Ali",))], (RelationSpec("Alice", "API", "owns"),), ts=10)
            _add(s, "b", [EntitySpec("api"), EntitySpec("Zed")], (RelationSpec("Zed", "ali", "knows"),), ts=20,
                 visibility="agent", agent="ann")
            _add(s, "c", [EntitySpec("Bea", "person")], (RelationSpec("Bea", "Zed", "pairs"),), ts=30)
            with s.transaction() as tx:
                assert tx.merge_entities("acme", 2, 3)  # Alice <- API: the owns edge becomes a self-loop
        assert _entity_reads(pg) == _entity_reads(lite)
    finally:
        lite.close()
        pg.close()


@pytest.mark.slow
def test_two_replicas_naming_one_new_entity_at_once_create_it_once(postgres_dsn: str) -> None:
    from graph.pg import PostgresGraphStore
    from testbed.postgres import fresh_database

    dsn = fresh_database(postgres_dsn)
    first, second = (PostgresGraphStore(dsn, owner=o, retry_s=2.0) for o in ("r1", "r2"))
    linked, started = threading.Event(), threading.Event()
    found: dict[str, list[int]] = {}

    def replica(store: Any, name: str, lead: bool) -> None:
        with store.transaction() as tx:
            mem_id = tx.allocate_ids(1)[0]
            tx.write_memory(row(mem_id, name, session=name.replace(" ", "-")))  # no shared session lock
            if not lead:
                linked.wait(10)
                started.set()
            found[name] = tx.link_entities("acme", mem_id, [EntitySpec("Alice", "person", (name,))], [], 1)
            if lead:
                linked.set()
                started.wait(10)
                time.sleep(0.3)  # the other replica's alias insert now waits for this commit

    threads = [threading.Thread(target=replica, args=(first, "from r1", True)),
               threading.Thread(target=replica, args=(second, "from r2", False))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert found["from r1"] == found["from r2"]
        (alice,) = first.entity_records("acme")
        assert sorted(alice.aliases) == ["Alice", "from r1", "from r2"]  # in commit order, whichever won
        assert len(first.all_mentions("acme")) == 2
    finally:
        first.close()
        second.close()


def test_a_store_written_before_entities_gains_their_tables_at_open(tmp_path: Path, postgres_dsn: str) -> None:
    import psycopg

    from graph.pg import PostgresGraphStore
    from testbed.postgres import fresh_database

    lite_path = tmp_path / "graph.sqlite3"
    GraphDB(lite_path).close()
    with sqlite3.connect(lite_path) as conn:  # as version 2 left it
        for table in ("entities", "entity_aliases", "mentions", "relations"):
            conn.execute(f"DROP TABLE {table}")
        conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    dsn = fresh_database(postgres_dsn)
    PostgresGraphStore(dsn, owner="old", retry_s=2.0).close()
    with psycopg.connect(dsn, autocommit=True) as pg_conn:  # as version 3 left it
        pg_conn.execute("DROP TABLE entities, entity_aliases, mentions, relations")
        pg_conn.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    for store in (SqliteGraphStore(GraphDB(lite_path)), PostgresGraphStore(dsn, owner="new", retry_s=2.0)):
        try:
            assert _add(store, "a", [EntitySpec("Alice")])[1] and store.entities("acme", None)[0].name == "Alice"
        finally:
            store.close()


@pytest.mark.slow
def test_a_store_from_before_alias_views_shows_each_alias_to_whoever_sees_a_mention(tmp_path: Path,
                                                                                  postgres_dsn: str) -> None:
    import psycopg

    from graph.pg import PostgresGraphStore
    from testbed.postgres import fresh_database

    lite_path = tmp_path / "graph.sqlite3"
    lite = SqliteGraphStore(GraphDB(lite_path))
    _add(lite, "a", [EntitySpec("Alice", None, ("al",))])
    _add(lite, "b", [EntitySpec("Bob", None, ("bobby",))], visibility="agent", agent="ann")
    lite.close()
    with sqlite3.connect(lite_path) as conn:  # as version 4 left it
        conn.execute("DROP TABLE alias_seen")
        conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    dsn = fresh_database(postgres_dsn)
    pg = PostgresGraphStore(dsn, owner="old", retry_s=2.0)
    _add(pg, "a", [EntitySpec("Alice", None, ("al",))])
    _add(pg, "b", [EntitySpec("Bob", None, ("bobby",))], visibility="agent", agent="ann")
    pg.close()
    with psycopg.connect(dsn, autocommit=True) as pg_conn:  # as version 5 left it
        pg_conn.execute("DROP TABLE alias_seen")
        pg_conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    for store in (SqliteGraphStore(GraphDB(lite_path)), PostgresGraphStore(dsn, owner="new", retry_s=2.0)):
        try:
            assert [(e.name, e.aliases) for e in store.entities("acme", None)] == [("Alice", ("Alice", "al"))]
            assert {e.name: e.aliases for e in store.entities("acme", "ann")} == {
                "Alice": ("Alice", "al"), "Bob": ("Bob", "bobby")}
            assert store.entity_by_name("acme", "bobby", "bob") is None
        finally:
            store.close()


def test_entity_names_are_read_in_one_batch_and_only_where_the_viewer_sees_a_mention(store: GraphStore) -> None:
    """Recall's entity branch names many entities a query: one read for all, the visibility entity() applies."""
    _m1, (shared, secret) = _add(store, "a", [EntitySpec("Payments API"), EntitySpec("Project Falcon")],
                                 visibility="agent", agent="ann")
    _m2, (again,) = _add(store, "b", [EntitySpec("payments api")], agent="bob")
    _m3, (other,) = _add(store, "c", [EntitySpec("Payments API")], tenant="globex")
    assert again != shared  # ann's name was hers alone: bob's declaration is an entity of its own
    wanted = [shared, secret, again, other, 999_999]
    for viewer in (None, "ann", "bob"):
        one_by_one = {e: n.name for e in wanted if (n := store.entity("acme", e, viewer)) is not None}
        assert store.entity_names("acme", wanted, viewer) == one_by_one
    assert store.entity_names("acme", wanted, "ann") == {shared: "Payments API", secret: "Project Falcon",
                                                         again: "payments api"}
    assert store.entity_names("acme", wanted, "bob") == {again: "payments api"}
    assert store.entity_names("globex", wanted, None) == {other: "Payments API"}
    assert store.entity_names("acme", [], None) == {}
