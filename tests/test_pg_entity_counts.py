"""Entity mention counts on PostgreSQL (schema step 9): kept in the ``counts`` table by the write
transactions that insert or delete mention rows, so recall's entity branch, ``entity()`` and the
entity listing read two keys an entity instead of counting its mentions, and the counts stay
equal to a recount through adds, private rows, merges, erased links, deletes, restores, a rolled
back write and an upgrade from a store that had none. A real PostgreSQL server."""

from __future__ import annotations

import psycopg
import pytest

from graph.api import EntitySpec
from graph.pg import PostgresGraphStore
from graph.pg.maintenance import PgMaintenance
from graph.pg.migrations import LATEST
from tests.support.pg_graph import row

VIEWERS = (None, "ann", "bob", "cy")


def _add(store: PostgresGraphStore, names: list[str], *, tenant: str = "acme", agent: str = "ann",
         private: bool = False) -> int:
    with store.transaction() as tx:
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, f"memory {mem_id}", tenant=tenant, agent=agent,
                            visibility="agent" if private else "tenant"))
        tx.link_entities(tenant, mem_id, [EntitySpec(n) for n in names], [], 7)
        return mem_id


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
    ids = _entity_ids(dsn, tenant)
    for viewer in VIEWERS:
        counts = store.entity_mention_counts(tenant, ids, viewer, 10_000)
        assert counts == {e: _visible(dsn, tenant, e, viewer) for e in ids}, viewer
        for e in ids:
            node = store.entity(tenant, e, viewer)
            assert (node.mentions if node is not None else 0) == counts[e]
        listed = {e.id: e.mentions for e in store.entities(tenant, viewer)}
        assert listed == {e: n for e, n in counts.items() if n}, viewer
        assert set(store.entity_names(tenant, ids, viewer)) == {e for e, n in counts.items() if n}, viewer
    assert PgMaintenance(store).stale_counts() == {}


def test_kept_counts_follow_adds_private_rows_merges_erased_links_deletes_and_restores(
        store: PostgresGraphStore, dsn: str) -> None:
    m1 = _add(store, ["Alice", "Payments API"])
    _add(store, ["Alice"], agent="bob", private=True)
    m3 = _add(store, ["Alice", "Falcon"], agent="ann", private=True)
    _add(store, ["Payments-API", "Bob"], agent="cy")
    _add(store, ["Alice"], tenant="globex")  # another tenant's Alice is another entity with its own count
    again = _add(store, ["Alice", "Alice", "Falcon"])  # a repeated name is one mention
    _agree(store, dsn)
    _agree(store, dsn, "globex")
    alice, falcon = (store.entity_ids("acme", ["alice", "falcon"])[n] for n in ("alice", "falcon"))
    theirs = store.entity_ids("globex", ["alice"])["alice"]
    for viewer in VIEWERS:  # another tenant's entity id counts nothing here, and is neither read nor listed
        assert store.entity_mention_counts("acme", [theirs], viewer, 10) == {theirs: 0}
        assert store.entity("acme", theirs, viewer) is None
        assert theirs not in {e.id for e in store.entities("acme", viewer)}
    assert store.entity_mention_counts("acme", [alice, falcon], None, 10) == {alice: 2, falcon: 1}
    assert store.entity_mention_counts("acme", [alice], "ann", 2) == {alice: 2}  # capped, as the count was
    assert store.entity_mention_counts("acme", [alice], "ann", 0) == {alice: 0}

    with store.transaction() as tx:
        assert tx.merge_entities("acme", alice, falcon)  # m3 and `again` mentioned both: one mention left each
    _agree(store, dsn)
    with store.transaction() as tx:
        assert tx.erase_entity_links("acme", [(m1, alice)], []) == 1
    _agree(store, dsn)
    with store.transaction() as tx:
        assert tx.erase_memory("acme", m3) and tx.erase_memory("acme", again)
    _agree(store, dsn)
    with store.transaction() as tx:
        assert tx.restore_mentions("acme", m1, [alice]) == 1
        assert tx.restore_mentions("acme", m1, [alice]) == 0  # already there: counted once
    _agree(store, dsn)
    with pytest.raises(RuntimeError), store.transaction() as tx:  # a write that fails leaves no count behind
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, "x"))
        tx.link_entities("acme", mem_id, [EntitySpec("Zed"), EntitySpec("Alice")], [], 7)
        raise RuntimeError("the add fails after its mentions")
    _agree(store, dsn)
    assert "zed" not in store.entity_ids("acme", ["zed"])


def test_entity_counts_names_and_listing_never_read_the_mention_rows(store: PostgresGraphStore, dsn: str) -> None:
    for i in range(40):
        _add(store, ["Hub"] + (["Rare"] if i < 3 else []), agent=f"a{i % 4}", private=i % 10 == 0)
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
    _add(store, ["Alice"])
    _add(store, ["Alice"], agent="bob", private=True)
    alice = store.entity_ids("acme", ["alice"])["alice"]
    _sql(dsn, f"UPDATE counts SET n = 7 WHERE scope = 'mention' AND key = '{alice}' || chr(31)",
         f"DELETE FROM counts WHERE scope = 'mention' AND key = '{alice}' || chr(31) || 'bob'")
    assert sorted(PgMaintenance(store).stale_counts()["acme"]) == [
        f"mention '{alice}/': kept 7, rows 1", f"mention '{alice}/bob': kept 0, rows 1"]
    with store.transaction() as tx:
        tx.rebuild_counts()
    _agree(store, dsn)
    assert store.entity_mention_counts("acme", [alice], "bob", 10) == {alice: 2}


def test_a_version_8_store_gains_its_mention_counts_from_the_rows_at_open(store: PostgresGraphStore,
                                                                          dsn: str) -> None:
    for i in range(30):
        _add(store, ["Alice", f"Thing {i % 4}"], agent=f"a{i % 3}", private=i % 5 == 0)
    store.close()
    _sql(dsn, "DELETE FROM counts WHERE scope = 'mention'", "UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    reopened = PostgresGraphStore(dsn, owner="replica-a", retry_s=2.0)
    try:
        assert reopened.meta("schema_version") == str(LATEST)
        kept = _sql(dsn, "SELECT count(*) FROM counts WHERE scope = 'mention'")
        assert int(kept[0][0]) > 4  # type: ignore[arg-type]
        _agree(reopened, dsn)
        _add(reopened, ["Alice"], agent="a1", private=True)  # and the upgraded store keeps them from then on
        _agree(reopened, dsn)
    finally:
        reopened.close()
