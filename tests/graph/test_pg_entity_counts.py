"""Entity mention counts on PostgreSQL (schema step 9): kept in the ``counts`` table by the write
transactions that insert or delete mention rows, so recall's entity branch, ``entity()`` and the
entity listing read two keys an entity instead of counting its mentions, and the counts stay
equal to a recount through adds, private rows, merges, erased links, deletes, restores, a rolled
back write and an upgrade from a store that had none. A real PostgreSQL server."""

from __future__ import annotations

import threading

import psycopg
import pytest

from graph.api import EntitySpec
from graph.pg import PostgresGraphStore
from graph.pg.maintenance import PgMaintenance
from graph.pg.migrations import LATEST
from graph.pg.txn import PgTxn
from tests.support.entity_counts import VIEWERS, add_mentioning, agree, follow_the_writes
from tests.support.pg_graph import row


def _sql(dsn: str, *statements: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        out: list[tuple[object, ...]] = []
        for statement in statements:
            cur = conn.execute(statement)  # type: ignore[call-overload]
            out = cur.fetchall() if cur.description else []
        return out


def _visible(dsn: str, tenant: str, entity_id: int, viewer: str | None) -> int:
    """The count straight from the mention rows (what the kept count must equal)."""
    with psycopg.connect(dsn) as conn:
        found = conn.execute("SELECT count(*) FROM mentions WHERE tenant = %s AND entity_id = %s AND "
                             "(shared OR agent = %s)", [tenant, entity_id, "\x01" if viewer is None else viewer])
        return int(found.fetchone()[0])  # type: ignore[index]


def _entity_ids(dsn: str, tenant: str = "acme") -> list[int]:
    with psycopg.connect(dsn) as conn:
        return [int(r[0]) for r in conn.execute("SELECT id FROM entities WHERE tenant = %s ORDER BY id", [tenant])]


def _agree(store: PostgresGraphStore, dsn: str, tenant: str = "acme") -> None:
    agree(store, tenant, _entity_ids(dsn, tenant), lambda e, viewer: _visible(dsn, tenant, e, viewer),
          PgMaintenance(store).stale_counts)


@pytest.mark.slow
def test_kept_counts_follow_adds_private_rows_merges_erased_links_deletes_and_restores(
        store: PostgresGraphStore, dsn: str) -> None:
    follow_the_writes(store, lambda tenant: _agree(store, dsn, tenant))


@pytest.mark.slow
def test_entity_counts_names_and_listing_never_read_the_mention_rows(store: PostgresGraphStore, dsn: str) -> None:
    for i in range(40):  # named in a shared memory first: one entity each, whoever mentions it after
        add_mentioning(store, ["Hub"] + (["Rare"] if i < 3 else []), agent=f"a{i % 4}", private=i % 10 == 1)
    hub, rare = (store.entity_ids("acme", ["hub", "rare"])[n] for n in ("hub", "rare"))
    want = {v: (_visible(dsn, "acme", hub, v), _visible(dsn, "acme", rare, v)) for v in VIEWERS}
    _sql(dsn, "ALTER TABLE mentions RENAME TO mentions_away")
    try:  # counted from the mention rows (a hub: one index entry a mention), each read would fail here
        for viewer in VIEWERS:
            n_hub, n_rare = want[viewer]
            assert store.entity_mention_counts("acme", [hub, rare], viewer, 10_000) == {hub: n_hub, rare: n_rare}
            node = store.entity("acme", hub, viewer)
            assert node is not None and node.mentions == n_hub
            assert [(e.name, e.mentions) for e in store.entities("acme", viewer)] == [("Hub", n_hub), ("Rare", n_rare)]
            assert store.entity_names("acme", [hub, rare], viewer) == {hub: "Hub", rare: "Rare"}
    finally:
        _sql(dsn, "ALTER TABLE mentions_away RENAME TO mentions")


def test_stale_mention_counts_are_found_and_rebuilt_from_the_rows(store: PostgresGraphStore, dsn: str) -> None:
    add_mentioning(store, ["Alice"])
    add_mentioning(store, ["Alice"], agent="bob", private=True)
    alice = store.entity_ids("acme", ["alice"])["alice"]
    _sql(dsn, f"UPDATE counts SET n = 7 WHERE scope = 'mention' AND key = '{alice}' || chr(31)",
         f"DELETE FROM counts WHERE scope = 'mention' AND key = '{alice}' || chr(31) || 'bob'")
    assert sorted(PgMaintenance(store).stale_counts()["acme"]) == [
        f"mention '{alice}/': kept 7, rows 1", f"mention '{alice}/bob': kept 0, rows 1"]
    with store.transaction() as tx:
        tx.rebuild_counts()
    _agree(store, dsn)
    assert store.entity_mention_counts("acme", [alice], "bob", 10) == {alice: 2}


@pytest.mark.slow
def test_a_version_8_store_gains_its_mention_counts_from_the_rows_at_open(store: PostgresGraphStore,
                                                                          dsn: str) -> None:
    for i in range(30):
        add_mentioning(store, ["Alice", f"Thing {i % 4}"], agent=f"a{i % 3}", private=i % 5 == 0)
    store.close()
    _sql(dsn, "DELETE FROM counts WHERE scope = 'mention'", "UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    reopened = PostgresGraphStore(dsn, owner="replica-a", retry_s=2.0)
    try:
        assert reopened.meta("schema_version") == str(LATEST)
        kept = _sql(dsn, "SELECT count(*) FROM counts WHERE scope = 'mention'")
        assert int(kept[0][0]) > 4  # type: ignore[arg-type]
        _agree(reopened, dsn)
        add_mentioning(reopened, ["Alice"], agent="a1", private=True)  # and the upgraded store keeps them from then on
        _agree(reopened, dsn)
    finally:
        reopened.close()


@pytest.mark.slow
def test_two_replicas_writing_the_same_entities_at_once_count_every_mention_once(dsn: str) -> None:
    """Two replicas, two writers each, add memories that mention the same hub entity and a few shared
    topics at the same time (a quarter of them private), then two topics are merged. Every committed
    mention is counted exactly once: the kept counts equal a recount for every viewer, through
    either replica."""
    a = PostgresGraphStore(dsn, owner="replica-a", retry_s=30.0)
    b = PostgresGraphStore(dsn, owner="replica-b", retry_s=30.0)
    errors: list[BaseException] = []
    start = threading.Barrier(4)

    def writer(store: PostgresGraphStore, agent: str) -> None:
        try:
            start.wait()
            for i in range(40):
                def body(tx: PgTxn, i: int = i) -> None:
                    mem_id = tx.allocate_ids(1)[0]
                    private = ("tenant", "agent")[i % 4 == 0]
                    tx.write_memory(row(mem_id, f"{agent} {i}", agent=agent, visibility=private))
                    names = ["Hub", f"Topic {i % 5}", f"Topic {(i + 2) % 5}"]
                    tx.link_entities("acme", mem_id, [EntitySpec(n) for n in names], [], 7)
                store.run(body)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, agent))
               for s, agent in ((a, "ann"), (a, "bob"), (b, "cy"), (b, "ann"))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        found = a.entity_ids("acme", ["hub", "topic 1", "topic 3"])
        with a.transaction() as tx:
            assert tx.merge_entities("acme", found["topic 1"], found["topic 3"])
        for store in (a, b):
            _agree(store, dsn)
        assert a.entity_mention_counts("acme", [found["hub"]], None, 10_000) == {found["hub"]: 160 - 40}
    finally:
        a.close()
        b.close()
