"""The PostgreSQL graph store as replicas share it: leases, concurrent writers, schema versions,
outages and error kinds, against real servers (testbed/postgres.py)."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

from graph.api import GraphStoreError, RowFilter
from graph.pg import InvalidDSNError, PostgresGraphStore
from graph.pg.errors import is_transient, kind_of
from graph.pg.maintenance import PgMaintenance
from graph.pg.migrations import LATEST, migrate
from testbed.postgres import PostgresServer, fresh_database
from tests.support.pg_graph import T, add, expected_windows, ids, row, windows

# ---- journal and leases ------------------------------------------------------------------------

@pytest.mark.slow
def test_a_replica_sees_another_ones_journal_only_after_its_lease_expired(dsn: str) -> None:
    a = PostgresGraphStore(dsn, owner="replica-a", lease_s=1.5)
    b = PostgresGraphStore(dsn, owner="replica-b", lease_s=1.5)
    try:
        with a.transaction() as tx:
            tx.journal([("add", T, "mem:7")])
        assert [(e.op, e.item_id, e.owner) for e in a.journal()] == [("add", "mem:7", "replica-a")]  # type: ignore[attr-defined]
        time.sleep(2.0)  # longer than the lease: a's heartbeat kept renewing it
        assert b.journal() == [] and b.journal_size() == 1
        a.close()  # a is gone: nobody renews its lease
        deadline = time.monotonic() + 5
        while not b.journal() and time.monotonic() < deadline:
            time.sleep(0.1)
        (entry,) = b.journal()
        assert entry.item_id == "mem:7"
        with PostgresGraphStore(dsn, owner="replica-c", lease_s=1.5) as c:
            assert [e.seq for e in c.journal()] == [entry.seq]
            assert b.claim_journal([entry.seq]) == [entry.seq]  # b takes it over: c may no longer act on it
            assert c.claim_journal([entry.seq]) == [] and c.journal() == []
        with b.transaction() as tx:
            tx.clear_journal_seqs([entry.seq])
        assert b.journal_size() == 0
    finally:
        a.close()
        b.close()


def test_a_store_that_succeeds_a_locked_directory_acts_at_once_on_its_predecessors_entries_only(dsn: str) -> None:
    """The data directory's lock proves its last holder is gone: entries written under that
    directory's scope are the successor's at once, live lease or not; nobody else's are."""
    dead = PostgresGraphStore(dsn, owner="host:11:aaaa@dir-x", lease_s=30)
    other = PostgresGraphStore(dsn, owner="host:12:bbbb@dir-y", lease_s=30)
    replica = PostgresGraphStore(dsn, owner="host:13:cccc", lease_s=30)
    try:
        for store, ref in ((dead, "mem:1"), (other, "mem:2"), (replica, "mem:3")):
            with store.transaction() as tx:
                tx.journal([("add", T, ref)])
        dead.close()  # killed: its lease has 30 s to run
        with PostgresGraphStore(dsn, owner="host:14:dddd@dir-x", succeeds="@dir-x", lease_s=30) as heir:
            (entry,) = heir.journal()
            assert entry.item_id == "mem:1"
            assert heir.claim_journal([e.seq for e in PgMaintenance(heir).journal()]) == [entry.seq]
        with PostgresGraphStore(dsn, owner="host:15:eeee", lease_s=30) as stranger:
            assert stranger.journal() == []  # without the lock, a lease is the only proof
    finally:
        dead.close()
        other.close()
        replica.close()


# ---- the node cache ----------------------------------------------------------------------------

def test_a_replicas_cached_reads_answer_another_replicas_writes_at_once(dsn: str) -> None:
    """Replica b caches nodes, contents, bounds and counts; every write through replica a (an add, a
    delete, a memory re-added under the same id with other content) shows in b's very next read."""
    with PostgresGraphStore(dsn, owner="a") as a, PostgresGraphStore(dsn, owner="b") as b:
        first, second = ids(a, 2)
        add(a, row(first, "the kiln is hot", ts=10))
        for _ in range(2):  # the second round is answered from the cache
            assert b.memory(T, first) is not None and b.memory(T, second) is None
            assert b.contents(T, [first, second]) == {first: "the kiln is hot"}
            assert b.bounds(T, "s1") == ((10, first), (10, first)) and b.non_turn_count(T) == 0
        node = b.memory(T, first)
        assert node is not None and b.adjacent_many(T, [node]) == {first: (None, None)}
        assert b.adjacent_many(T, [node]) == {first: (None, None)}
        assert b.cache.entries.hits > 0
        add(a, row(second, "a note", ts=20, type_="note"))
        assert b.adjacent_many(T, [node]) == {first: (None, (20, second))}
        assert b.memory(T, second) is not None and b.bounds(T, "s1") == ((10, first), (20, second))
        assert b.non_turn_count(T) == 1 and b.contents(T, [second]) == {second: "a note"}
        with a.transaction() as tx:
            assert tx.erase_memory(T, first)
        assert b.memory(T, first) is None and b.contents(T, [first]) == {}
        assert b.bounds(T, "s1") == ((20, second), (20, second))
        add(a, row(first, "the kiln is cold now", ts=30))  # the same id, other content
        assert b.contents(T, [first]) == {first: "the kiln is cold now"}
        assert b.memories(T, [first, second])[first].ts_us == 30
        assert b.memory("globex", first) is None  # another tenant's id reads as missing, cached or not


def test_one_request_on_a_replica_sees_what_another_committed_before_it_began(dsn: str) -> None:
    """Inside consistent_reads replica b checks the tenant's version once: a's write acknowledged
    before the request began is visible, and the request's repeated reads are cache hits."""
    with PostgresGraphStore(dsn, owner="a") as a, PostgresGraphStore(dsn, owner="b") as b:
        first, second = ids(a, 2)
        add(a, row(first, "before", ts=10))
        assert b.memory(T, first) is not None  # cached, at the version of that one add
        add(a, row(second, "also before", ts=20))
        queries: list[str] = []
        real_run = b.queries.run
        b.queries.run = lambda fn, what="read", **kw: queries.append(what) or real_run(fn, what, **kw)  # type: ignore[method-assign]
        with b.consistent_reads(T):
            assert b.contents(T, [first, second]) == {first: "before", second: "also before"}
            assert b.memory(T, second) is not None and b.memory(T, first) is not None  # the old entry refreshed
            asked = len(queries)
            for _ in range(3):
                assert b.contents(T, [first, second]) == {first: "before", second: "also before"}
                assert b.memory(T, first) is not None
            assert len(queries) == asked  # answered from the cache under the request's one check
        assert b.contents(T, [first]) == {first: "before"} and len(queries) == asked + 1  # outside: checked again
        with a.transaction() as tx:
            assert tx.erase_memory(T, second)
        with b.consistent_reads(T):  # the next request
            assert b.contents(T, [first, second]) == {first: "before"}


@pytest.mark.slow
def test_a_store_without_a_node_cache_reads_through(dsn: str) -> None:
    with PostgresGraphStore(dsn, owner="a") as a, PostgresGraphStore(dsn, owner="b", cache_nodes=0) as b:
        (only,) = ids(a, 1)
        add(a, row(only, "x", ts=5))
        assert b.contents(T, [only]) == {only: "x"} and b.bounds(T, None) == ((5, only), (5, only))
        assert b.cache.entries.hits == 0 and len(b.cache.entries) == 0


# ---- schema ------------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_older_schema_is_upgraded_at_open_and_its_rows_become_searchable(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert migrate(conn, through=1) == 0
        conn.execute("INSERT INTO memories (id, tenant, session, agent, type, source, salience, visibility, ts_us, "
                     "metadata, content, content_len, content_hash) VALUES "
                     "(1, %s, 's', 'ann', 'turn', '{}', 0.5, 'tenant', 1, '{}', 'the kiln', 8, 'h'), "
                     "(2, %s, 's', 'ann', 'turn', '{}', 0.5, 'tenant', 2, '{}', 'moved', 5, 'h2')", [T, T])
        conn.execute("INSERT INTO tenant_state (tenant, memories) VALUES (%s, 2)", [T])
    with PostgresGraphStore(dsn, owner="a") as s:
        assert s.meta("schema_version") == str(LATEST)
        assert sorted(h.id for h in s.lexical_window(RowFilter(T), ["kiln"], 10)) == [1, 2]


def test_a_newer_schema_is_refused_and_left_untouched(dsn: str) -> None:
    PostgresGraphStore(dsn, owner="a").close()
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(GraphStoreError) as err:
        PostgresGraphStore(dsn, owner="a")
    assert err.value.kind == "schema" and "99" in err.value.detail and str(LATEST) in err.value.detail


@pytest.mark.slow
def test_a_running_replica_stops_writing_once_another_has_upgraded_the_store_past_it(dsn: str) -> None:
    """A replica of the older version still running after a newer one migrated the store would
    write rows without what the newer schema keeps (before step 9: mentions without their counts).
    Each of its write transactions is refused and rolled back instead; its reads still answer."""
    with PostgresGraphStore(dsn, owner="old") as old:
        kept, late = ids(old, 2)
        add(old, row(kept, "written before the upgrade"))
        with psycopg.connect(dsn, autocommit=True) as conn:  # as a newer replica's migration leaves it
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", [str(LATEST + 1)])
        for write in (lambda: add(old, row(late, "written after it")), lambda: ids(old, 1)):
            with pytest.raises(GraphStoreError) as err:
                write()
            assert err.value.kind == "schema" and str(LATEST + 1) in err.value.detail
            assert str(LATEST) in err.value.detail
        assert old.contents(T, [kept, late]) == {kept: "written before the upgrade"}
        assert old.count(T) == 1
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", [str(LATEST)])
        add(old, row(late, "written once the versions agree"))
        assert old.count(T) == 2


def test_a_dsn_that_does_not_parse_is_an_invalid_dsn_error() -> None:
    with pytest.raises(InvalidDSNError):
        PostgresGraphStore("host=127.0.0.1 port", owner="a")


# ---- failures ----------------------------------------------------------------------------------

@pytest.mark.slow
def test_a_stopped_server_is_unavailable_with_nothing_half_written() -> None:
    server = PostgresServer(durable=True)  # stopped like a crash: what was acknowledged must survive
    try:
        server.start()
        s = PostgresGraphStore(fresh_database(server.dsn()), owner="a", retry_s=1.0)
        a, b = ids(s, 2)
        add(s, row(a, "before"))
        server.stop("immediate")
        with pytest.raises(GraphStoreError) as err:
            add(s, row(b, "during"))
        assert err.value.kind == "unavailable"
        with pytest.raises(GraphStoreError) as err:
            s.count(T)
        assert err.value.kind == "unavailable"
        server.start()
        deadline = time.monotonic() + 30  # the pool reconnects with a backoff after an outage
        while True:
            try:
                s.count(T)
                break
            except GraphStoreError:
                if time.monotonic() > deadline:
                    raise
        assert s.count(T) == 1 and s.memory(T, b) is None and [k[1] for k in s.page(T, "s1", None, 5)] == [a]
        add(s, row(b, "after"))  # dead pooled connections are replaced before a body runs
        assert [k[1] for k in s.page(T, "s1", None, 5)] == [b, a]
        s.close()
    finally:
        server.close()


@pytest.mark.slow
def test_a_server_down_at_open_is_unavailable() -> None:
    server = PostgresServer()  # initialised, never started
    try:
        with pytest.raises(GraphStoreError) as err:
            PostgresGraphStore(server.dsn(), owner="a", retry_s=0.5)
        assert err.value.kind == "unavailable"
    finally:
        server.close()


@pytest.mark.parametrize(("state", "kind", "transient"), [
    ("08006", "unavailable", True), ("53100", "full", False), ("25006", "read_only", False),
    ("40001", "conflict", True), ("40P01", "busy", True), ("23505", "conflict", False),
    ("42P01", "schema", False), ("XX001", "corrupt", False), ("57P01", "unavailable", True),
    ("58030", "io", False),
])
def test_errors_map_by_sqlstate(state: str, kind: str, transient: bool) -> None:
    exc = psycopg.errors.lookup(state)()
    assert kind_of(exc) == kind and is_transient(exc) is transient


# ---- replicas at once --------------------------------------------------------------------------

@pytest.mark.slow
def test_two_replicas_writing_one_session_at_once_keep_every_window_and_duplicate(dsn: str) -> None:
    a, b = PostgresGraphStore(dsn, owner="replica-a"), PostgresGraphStore(dsn, owner="replica-b")
    dup_hits: list[int | None] = []
    try:
        def writer(s: PostgresGraphStore, n: int) -> None:
            for i in range(n):
                (mem_id,) = ids(s, 1)
                content = "same words" if i == 0 else f"turn {mem_id}"
                with s.transaction() as tx:
                    r = row(mem_id, content, ts=10_000_000 - mem_id)  # each add goes before the last one
                    if i == 0:
                        dup_hits.append(tx.duplicate_of(r, 10_000_000))
                    tx.write_memory(r)
                    tx.conn.execute("SELECT pg_sleep(0.02)")  # both replicas' adds are in flight at once

        threads = [threading.Thread(target=writer, args=(s, 15)) for s in (a, b)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert a.count(T) == 30 and b.count(T, "s1") == 30
        assert windows(dsn) == expected_windows(a)  # fails without the per-session advisory lock
        assert PgMaintenance(b).stale_counts() == {}  # every counter's deltas landed once, from both replicas
        assert sorted(dup_hits, key=lambda x: x is not None)[0] is None and any(h is not None for h in dup_hits)
    finally:
        a.close()
        b.close()


@pytest.mark.slow
def test_run_replays_a_transaction_whose_connection_was_lost_and_transaction_does_not(
        store: PostgresGraphStore) -> None:
    a, b = ids(store, 2)
    attempts: list[int] = []

    def body(tx: Any) -> int:
        attempts.append(1)
        tx.write_memory(row(a, "written once"))
        if len(attempts) == 1:
            tx.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        return a

    assert store.run(body) == a and len(attempts) == 2 and store.count(T) == 1
    with pytest.raises(GraphStoreError) as err, store.transaction() as tx:
        tx.write_memory(row(b, "lost"))
        tx.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    assert err.value.kind == "unavailable" and store.memory(T, b) is None and store.count(T) == 1


def test_a_pooled_connection_the_server_dropped_is_replaced_before_a_transaction_runs(
        store: PostgresGraphStore, dsn: str) -> None:
    assert store.count(T) == 0  # the pool holds a connection now
    with psycopg.connect(dsn, autocommit=True) as admin:
        killed = admin.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                               "WHERE datname = current_database() AND pid <> pg_backend_pid()").fetchone()
    assert killed is not None and killed[0] >= 1
    with store.transaction() as tx:  # not a failure: the body has not run yet when the loss is found
        (a,) = tx.allocate_ids(1)
        tx.write_memory(row(a, "after the drop"))
    assert store.memory(T, a) is not None


def test_without_optional_extensions_the_store_still_searches(dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from graph.pg import migrations

    monkeypatch.setattr(migrations, "_try_extension", lambda cur, name: False)  # a server without contrib
    with PostgresGraphStore(dsn, owner="a") as s:
        a, b = ids(s, 2)
        add(s, row(a, "the kiln café"), row(b, "other text", session="s2"))
        assert [h.id for h in s.lexical_window(RowFilter(T), ["kiln"], 5)] == [a]
        assert [h.id for h in s.lexical_window(RowFilter(T), ["café"], 5)] == [a]
        assert s.lexical_window(RowFilter(T), ["cafe"], 5) == []  # no unaccent: accents stay significant
        assert s.meta("lexical_unaccent") is None
