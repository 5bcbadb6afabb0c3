"""PgMaintenance against a real PostgreSQL server: doctor's scans, checks and repairs, tenant by tenant."""

from __future__ import annotations

import psycopg
import pytest

from graph.api import AGENT, AUTHORED_BY, IN_SESSION, SESSION, SUPERSEDES, GraphStoreError, RowFilter, mem_node
from graph.keys import DAY_US
from graph.maintenance_api import EdgeRow, MissingStructure, NodeRow
from graph.pg import LeasedJournalEntry, PostgresGraphStore
from graph.pg.maintenance import PgMaintenance
from graph.pg.migrations import LATEST
from tests.support.pg_graph import add, expected_windows, ids, row, windows

A, G = "acme", "globex"




@pytest.fixture
def m(store: PostgresGraphStore) -> PgMaintenance:
    return PgMaintenance(store)


def _sql(dsn: str, *statements: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[call-overload]


def _populate(store: PostgresGraphStore) -> dict[str, list[int]]:
    a = ids(store, 4)
    g = ids(store, 2)
    add(store, row(a[0], "acme plums", tenant=A, key="k0", agent="alice"),
        row(a[1], "acme pears", tenant=A, agent="bob", visibility="agent", type_="fact"),
        row(a[2], "acme figs", tenant=A, session="s2", agent="alice"),
        row(a[3], "acme restored", tenant=A, agent="alice", metadata={"restored_from": "mem:77"}),
        row(g[0], "globex plums", tenant=G, key="k0"), row(g[1], "globex pears", tenant=G))
    return {A: a, G: g}


# ---- rows, lookups, tenants ----------------------------------------------------------------------

def test_row_reads_and_lookups_of_one_tenant_never_return_another_tenants_rows(
        store: PostgresGraphStore, m: PgMaintenance) -> None:
    made = _populate(store)
    rows = m.memory_rows(A)
    assert [r.node.id for r in rows] == made[A] and {r.node.tenant for r in rows} == {A}
    assert (rows[0].content, rows[0].idempotency_key, rows[0].as_row()["content"]) == ("acme plums", "k0",
                                                                                      "acme plums")
    assert m.memory_rows(A, made[G]) == [] and [r.node.id for r in m.memory_rows(A, [made[A][2], 999])] == [made[A][2]]
    assert m.idempotency_keys(A, made[G]) == {} and m.idempotency_keys(A, made[A][:2]) == {made[A][0]: "k0",
                                                                                         made[A][1]: None}
    foreign = m.memory_rows(G)[0].node
    assert m.existing_memory(G, foreign.session, foreign.content_hash, foreign.ts_us) == foreign.id
    assert m.existing_memory(A, foreign.session, foreign.content_hash, foreign.ts_us) is None
    restored = m.memory_rows(A, [made[A][3]])[0].node
    assert m.restored_from(A, restored.content_hash, "mem:77") == restored.id
    assert m.restored_from(G, restored.content_hash, "mem:77") is None and m.restored_from(A, "x", "mem:77") is None
    assert m.id_in_use(made[G][0]) and not m.id_in_use(10_000)
    assert m.content_chars() == {t: sum(len(r.content) for r in m.memory_rows(t)) for t in (A, G)}


def test_a_tenant_named_only_by_a_stray_edge_is_present_and_its_edge_dangles(
        store: PostgresGraphStore, m: PgMaintenance) -> None:
    made = _populate(store)
    with store.transaction() as tx:
        tx.write_edge("ghost", "mem:999", "agent:ghost/x", AUTHORED_BY)  # neither end exists
        tx.write_edge(A, mem_node(made[A][0]), mem_node(made[G][0]), SUPERSEDES)  # the target is globex's
    assert m.tenants_present() == [A, "ghost", G]
    dangling = m.dangling_edges()
    assert [(d.edge.tenant, d.end, d.foreign) for d in dangling] == [(A, mem_node(made[G][0]), True),
                                                                     ("ghost", "mem:999", False)]
    version = store.version(A)
    assert m.remove_edges([d.edge for d in dangling] + [EdgeRow("x", "y", "z", A)]) == 2
    assert m.dangling_edges() == [] and m.tenants_present() == [A, G] and store.version(A) > version
    assert m.remove_edges([]) == 0


def test_missing_structure_is_listed_once_and_recreated_without_touching_present_rows(
        store: PostgresGraphStore, m: PgMaintenance, dsn: str) -> None:
    made = _populate(store)
    assert m.missing_structure() == []
    first, second = mem_node(made[A][0]), mem_node(made[A][2])
    _sql(dsn, "DELETE FROM nodes WHERE node_id = 'agent:acme/alice'",
         f"DELETE FROM edges WHERE src = '{second}' AND kind = 'IN_SESSION'")
    missing = m.missing_structure()
    assert missing == [
        MissingStructure(A, first, node=NodeRow("agent:acme/alice", AGENT, A, {"agent": "alice"})),
        MissingStructure(A, second, edge=EdgeRow(second, "session:acme/s2", IN_SESSION, A)),
    ]
    assert "alice" not in store.agents(A)
    m.create_structure([*missing, MissingStructure(A, first, node=NodeRow("session:acme/s1", SESSION, A,
                                                                          {"session": "changed"}))])
    assert m.missing_structure() == [] and "alice" in store.agents(A)
    assert NodeRow("agent:acme/alice", AGENT, A, {"agent": "alice"}) in m.nodes()
    assert NodeRow("session:acme/s1", SESSION, A, {"session": "s1"}) in m.nodes()  # present: left as it was
    assert EdgeRow(second, "session:acme/s2", IN_SESSION, A) in m.edges()


# ---- episodes, journal, totals, sizes --------------------------------------------------------------

@pytest.mark.slow
def test_the_journal_lists_every_replicas_entries_with_owner_and_lease(
        store: PostgresGraphStore, m: PgMaintenance, dsn: str) -> None:
    other = PostgresGraphStore(dsn, owner="replica-b", retry_s=2.0)
    try:
        with store.transaction() as tx:
            tx.journal([("add", A, "mem:1")])
        with other.transaction() as tx:
            tx.journal([("delete", G, "mem:2")])
        assert [e.item_id for e in store.journal()] == ["mem:1"]  # the request path sees its own (leases live)
        entries = m.journal()
        assert [(e.op, e.tenant, e.item_id) for e in entries] == [("add", A, "mem:1"), ("delete", G, "mem:2")]
        assert all(isinstance(e, LeasedJournalEntry) for e in entries)
        assert [e.owner for e in entries if isinstance(e, LeasedJournalEntry)] == ["replica-a", "replica-b"]
        assert m.id_in_use(2) and m.tenants_present() == [A, G]
    finally:
        other.close()


def test_episodes_and_disk_use(store: PostgresGraphStore, m: PgMaintenance) -> None:
    _populate(store)
    (ep,) = ids(store, 1)
    with store.transaction() as tx:
        tx.write_episode({"id": ep, "tenant": A, "session": "s1", "summary": "sum", "summary_source": "llm",
                          "summary_error": None, "first_id": None, "last_id": None, "turn_count": 2, "last_ts_us": 5,
                          "handoff_id": None, "created_us": 1, "updated_us": 2})
    assert m.episode_ids(A) == [ep] and m.episode_ids(G) == [] and m.episodes(A) == store.episodes(A)
    use = m.disk_use()
    assert use.wal is None and use.database is not None and use.database > 0


# ---- lexical checks and rebuilds -----------------------------------------------------------------

def test_a_damaged_window_is_found_and_rebuilt_for_that_tenant_only(
        store: PostgresGraphStore, m: PgMaintenance, dsn: str) -> None:
    made = _populate(store)
    assert m.window_state(A).differing == frozenset() and m.stale_counts() == {}
    # a lost re-point: the window of acme's first row borrows words no predecessor has
    _sql(dsn, f"UPDATE memories SET prev = 'quinces galore' WHERE id IN ({made[A][0]}, {made[G][1]})")
    state = m.window_state(A)
    assert state.present and state.damaged is None and state.differing == {made[A][0]}
    assert "lexical length" in m.stale_counts()[A][0]  # the tsvector grew: the kept length sum is stale
    assert [h.id for h in store.lexical_window(RowFilter(A), ["quinces"], 5)] == [made[A][0]]
    version = store.version(A)
    m.rebuild_lexical(A)
    assert m.window_state(A).differing == frozenset() and windows(dsn, A) == expected_windows(store, A)
    assert store.lexical_window(RowFilter(A), ["quinces"], 5) == [] and store.version(A) > version
    assert m.window_state(G).differing == {made[G][1]}  # another tenant's rows are not rewritten
    assert list(m.stale_counts()) == [G]


def test_tsvectors_made_under_another_text_configuration_are_found_and_reindexed(
        store: PostgresGraphStore, m: PgMaintenance, dsn: str) -> None:
    made = _populate(store)
    state = m.lexical_state(A)
    assert (state.index, state.name, state.indexed, state.differing) == ("ok", "memories_lexical", set(made[A]),
                                                                        frozenset())
    # the words are now indexed unstemmed: every stored tsvector ("plum") differs from a recount ("plums")
    _sql(dsn, "ALTER TEXT SEARCH CONFIGURATION memcore_text ALTER MAPPING FOR asciiword WITH simple")
    assert m.lexical_state(A).differing == set(made[A]) and m.lexical_state(G).differing == set(made[G])
    m.rebuild_lexical(A)
    assert m.lexical_state(A).differing == frozenset() and m.lexical_state(G).differing == set(made[G])
    assert [h.id for h in store.lexical_window(RowFilter(A), ["plums"], 5)] == [made[A][0]]


def test_a_dropped_or_invalid_lexical_index_is_reported_and_recreated(
        store: PostgresGraphStore, m: PgMaintenance, dsn: str) -> None:
    made = _populate(store)
    _sql(dsn, "DROP INDEX memories_lexical")
    assert m.lexical_state(A).index == "missing"
    m.rebuild_lexical(A)
    assert m.lexical_state(A).index == "ok" and m.window_state(A).damaged is None
    _sql(dsn, "UPDATE pg_index SET indisvalid = false WHERE indexrelid = 'memories_lexical'::regclass")
    assert m.window_state(A).damaged is not None and "invalid" in m.window_state(A).damaged
    m.rebuild_lexical(A)
    assert m.window_state(A).damaged is None
    assert [h.id for h in store.lexical_window(RowFilter(A), ["figs"], 5)] == [made[A][2]]


# ---- counts ----------------------------------------------------------------------------------------

def test_stale_counts_are_found_and_rebuilt_from_the_rows(store: PostgresGraphStore, m: PgMaintenance,
                                                          dsn: str) -> None:
    made = _populate(store)
    day = (made and m.memory_rows(A)[0].node.ts_us) // DAY_US
    before = {f: store.field_counts(A, f) for f in ("type", "agent", "channel")}
    _sql(dsn, "UPDATE counts SET n = n + 5 WHERE tenant = 'acme' AND scope = 'agent' AND key = 'alice'",
         "UPDATE tenant_state SET memories = 99 WHERE tenant = 'globex'",
         "DELETE FROM session_counts WHERE tenant = 'acme' AND session = 's2'",
         "DELETE FROM counts WHERE tenant = 'acme' AND scope = 'day'",
         "INSERT INTO private_counts VALUES ('acme', 's9', 'zed', 3)")
    stale = m.stale_counts()
    assert stale[G] == ["all '': kept 99, rows 2"]
    assert sorted(stale[A]) == sorted(["agent 'alice': kept 8, rows 3", f"day '{day:08d}': kept 0, rows 4",
                                       "private 's9/zed': kept 3, rows 0", "session 's2': kept 0, rows 1",
                                       "turns 's2': kept 0, rows 1"])
    versions = (store.version(A), store.version(G))
    with store.transaction() as tx:
        tx.rebuild_counts()
    assert m.stale_counts() == {} and store.version(A) > versions[0] and store.version(G) > versions[1]
    assert {f: store.field_counts(A, f) for f in ("type", "agent", "channel")} == before
    assert store.count(G) == 2 and store.counts_by_day(A, day, 1) == [4] and store.count(A, "s2") == 1


def test_a_closed_store_is_unavailable_to_maintenance(store: PostgresGraphStore, m: PgMaintenance) -> None:
    store.close()
    with pytest.raises(GraphStoreError) as caught:
        m.nodes()
    assert caught.value.kind == "unavailable"
    with pytest.raises(GraphStoreError):
        m.remove_edges([EdgeRow("a", "b", "c", A)])


def test_a_version_2_store_gains_its_scoped_counts_from_the_rows_at_open(store: PostgresGraphStore, dsn: str) -> None:
    made = _populate(store)
    store.close()
    _sql(dsn, "DROP TABLE counts", "UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    reopened = PostgresGraphStore(dsn, owner="replica-a", retry_s=2.0)
    try:
        assert reopened.meta("schema_version") == str(LATEST) and PgMaintenance(reopened).stale_counts() == {}
        assert reopened.field_counts(A, "agent") == {"alice": 3, "bob": 1}
        assert reopened.field_ids(A, "agent", "bob", None) == [made[A][1]]
        assert reopened.field_count(G, "type", "turn") == 2
    finally:
        reopened.close()
