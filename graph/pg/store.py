"""PostgresGraphStore: :class:`graph.api.GraphStore` over PostgreSQL, for N stateless replicas.

``PostgresGraphStore(dsn, owner=..., lease_s=30, pool_size=8)`` parses the DSN (a bad one is a
:class:`InvalidDSNError`, a ValueError), opens a psycopg pool, runs the migrations and starts
the *heartbeat* thread, which renews this owner's journal leases every ``lease_s / 3`` seconds
until :meth:`close`. :meth:`journal` lists what this replica may act on: its own entries and
those whose owner's lease has expired (that replica is gone); :meth:`claim_journal` takes such
entries over atomically before recovery acts on them. ``succeeds`` (an owner suffix) names the
processes this one replaced: a process that holds a data directory's lock (PostgreSQL with
embedded Chroma) knows the last holder is gone, so entries written under that directory's
suffix are its own at once, whatever their lease says.

Reads retry transient failures (connection lost, server restarting) for up to ``retry_s``
seconds; :meth:`run` does the same for a whole write transaction. :meth:`transaction` retries
only getting a connection: a body that already ran is never replayed behind the caller's back.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from graph.api import GraphStore, GraphStoreError, GraphTxn, JournalEntry, LexicalHit, RowFilter
from graph.pg import lexical
from graph.pg.cached_reads import CachedReads
from graph.pg.errors import retrying, wrap
from graph.pg.lexical_sample import SampledCounts
from graph.pg.migrations import migrate
from graph.pg.rows import scalar
from graph.pg.txn import PgTxn
from graph.traversal import neighbourhood

if TYPE_CHECKING:
    import networkx as nx

T = TypeVar("T")


class InvalidDSNError(ValueError):
    """``storage.postgres_dsn`` does not parse (the message never repeats the DSN: it may hold a password)."""


@dataclass(frozen=True, slots=True)
class LeasedJournalEntry(JournalEntry):
    """A journal entry with the replica that wrote it and when its lease ends (µs since the epoch)."""

    owner: str = ""
    lease_until_us: int = 0


def parse_dsn(dsn: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidDSNError("storage.postgres_dsn is not a valid PostgreSQL connection string") from exc


class PostgresGraphStore(CachedReads):
    """The durable graph on PostgreSQL (see the module docstring); ``owner`` names this replica
    in the journal and must be unique among live replicas (e.g. ``host:pid:uuid4``)."""

    def __init__(self, dsn: str, *, owner: str, lease_s: float = 30.0, pool_size: int = 8,
                 retry_s: float = 5.0, connect_timeout_s: float = 5.0, cache_entries: int = 256,
                 succeeds: str | None = None, cache_nodes: int = 50_000) -> None:
        params = parse_dsn(dsn)
        params.setdefault("connect_timeout", str(max(1, int(connect_timeout_s))))
        if not owner:
            raise ValueError("owner must name this replica (e.g. host:pid:uuid)")
        if succeeds is not None and (not succeeds or not owner.endswith(succeeds)):
            raise ValueError("succeeds must be a non-empty suffix of owner (the locked directory's scope)")
        self.owner, self.lease_s, self.retry_s = owner, float(lease_s), float(retry_s)
        self.succeeds = succeeds
        self.pool = ConnectionPool(kwargs={**params, "autocommit": True}, min_size=1, max_size=max(1, pool_size),
                                   timeout=retry_s, open=False, name=f"memcore-{owner}")
        try:
            self.pool.open(wait=True, timeout=max(retry_s, 1.0))
            self._with_conn(migrate, "migration", retry=False)
        except psycopg.Error as exc:
            self.pool.close()
            raise wrap(exc, "open") from exc
        except BaseException:
            self.pool.close()
            raise
        super().__init__(cache_nodes)
        self.cache_entries = max(0, cache_entries)
        self.prune_min_rows = lexical.COMMON_MIN_ROWS  # tenants above it drop very common query words
        self._sampled = SampledCounts()  # tenants of 4x its sample_rows estimate common query words
        self._cache_lock = threading.Lock()
        self._hoods: OrderedDict[tuple[str, str, int, int, int, int], tuple[int, nx.MultiDiGraph]] = OrderedDict()
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name=f"memcore-lease-{owner}", daemon=True)
        self._heartbeat.start()

    # ---- connections ----------------------------------------------------------------------------
    def _with_conn(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, *, retry: bool = True) -> T:
        def attempt() -> T:
            with self.pool.connection() as conn:
                return fn(conn)

        if not retry:
            try:
                return attempt()
            except psycopg.Error as exc:
                raise wrap(exc, what) from exc
        return retrying(attempt, what, self.retry_s)

    def read_with(self, fn: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """``fn`` on a pooled connection (autocommit; open a transaction for one snapshot), retried
        on transient failures; every failure leaves as a GraphStoreError naming ``what``."""
        return self._with_conn(fn, what)

    @contextmanager
    def transaction(self) -> Iterator[PgTxn]:
        """One write transaction: all of it commits or none of it does. Failures leave as
        GraphStoreError; only getting a live connection is retried (see :meth:`run`)."""
        conn = retrying(self._live_connection, "connect", self.retry_s)
        try:
            # pipeline mode: statements whose results nobody reads (locks, nodes, edges, counters)
            # travel with the next one that is read, so an add costs one round trip, not three
            with conn.pipeline(), conn.transaction():
                tx = PgTxn(conn, self.owner, self.lease_s)
                yield tx
                tx.finish()
        except psycopg.Error as exc:
            raise wrap(exc, "write") from exc
        finally:
            self.pool.putconn(conn)
            self.wrote()

    def _live_connection(self) -> psycopg.Connection[Any]:
        """A pooled connection that answered an empty query: one the server dropped (a restart,
        an idle timeout) is discarded and another tried before any of the body runs."""
        conn = self.pool.getconn()
        try:
            ConnectionPool.check_connection(conn)
        except psycopg.Error:
            self.pool.putconn(conn)  # broken: the pool discards it
            raise
        return conn

    def run(self, body: Callable[[PgTxn], T]) -> T:
        """``body`` in a transaction, run again (for up to ``retry_s``) when it failed transiently
        (connection lost, deadlock, serialization failure) before committing."""
        def attempt() -> T:
            with self.transaction() as tx:
                return body(tx)
        return retrying(attempt, "write", self.retry_s)

    # ---- lease and journal ----------------------------------------------------------------------
    def heartbeat(self) -> int:
        """Renew the leases of this owner's journal entries; called by the store's own thread every
        ``lease_s / 3`` s (callers need not). Returns how many entries were renewed."""
        def renew(conn: psycopg.Connection[Any]) -> int:
            cur = conn.execute("UPDATE journal SET lease_until = clock_timestamp() + make_interval(secs => %s) "
                               "WHERE owner = %s", [self.lease_s, self.owner])
            return cur.rowcount
        return self._with_conn(renew, "heartbeat")

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.heartbeat()
            except GraphStoreError:  # the next beat tries again; an expired lease only lets others recover
                continue

    def _actionable(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its parameters) for entries this store may act on: its own,
        those whose lease expired, and those of the processes it succeeds (see ``succeeds``)."""
        if self.succeeds is None:
            return "(owner = %s OR lease_until < clock_timestamp())", [self.owner]
        return ("(owner = %s OR lease_until < clock_timestamp() OR right(owner, char_length(%s)) = %s)",
                [self.owner, self.succeeds, self.succeeds])

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries this replica may act on: its own, those of owners whose lease expired, and
        those of the processes it succeeds."""
        condition, params = self._actionable()

        def read(conn: psycopg.Connection[Any]) -> list[JournalEntry]:
            rows = conn.execute(
                "SELECT seq, op, tenant, item_id, created_us, owner, "
                "(extract(epoch FROM lease_until) * 1000000)::bigint FROM journal "
                f"WHERE {condition} ORDER BY seq LIMIT %s",
                [*params, limit]).fetchall()
            return [LeasedJournalEntry(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5], int(r[6])) for r in rows]
        return self._with_conn(read, "journal read")

    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        """Take over entries before recovering them: each of ``seqs`` that is this replica's or whose
        lease expired (or whose owner this store succeeds) becomes this replica's, leased anew, in
        one statement, so two replicas recovering at once never both act on one entry. Returns the
        seqs claimed."""
        condition, params = self._actionable()

        def claim(conn: psycopg.Connection[Any]) -> list[int]:
            rows = conn.execute(
                "UPDATE journal SET owner = %s, lease_until = clock_timestamp() + make_interval(secs => %s) "
                f"WHERE seq = ANY(%s::bigint[]) AND {condition} RETURNING seq",
                [self.owner, self.lease_s, list(seqs), *params]).fetchall()
            return sorted(int(r[0]) for r in rows)
        return self._with_conn(claim, "journal claim")

    def journal_size(self) -> int:
        """Every pending entry, whoever owns it (doctor's figure)."""
        return self._with_conn(lambda c: int(scalar(c.execute("SELECT count(*) FROM journal"))), "journal read")

    def meta(self, key: str) -> str | None:
        row = self._with_conn(lambda c: c.execute("SELECT value FROM meta WHERE key = %s", [key]).fetchone(),
                              "meta read")
        return None if row is None else str(row[0])

    # ---- lexical --------------------------------------------------------------------------------
    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *,
                       own: bool = False) -> list[LexicalHit]:
        return self._with_conn(lambda conn: self._window(conn, f, terms, limit, own), "lexical search")

    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        return self._with_conn(lambda conn: (self._window(conn, f, terms, limit, False),
                                             self._window(conn, f, terms, limit, True)), "lexical search")

    def _window(self, conn: psycopg.Connection[Any], f: RowFilter, terms: Sequence[str], limit: int,
                own: bool) -> list[LexicalHit]:
        state = conn.execute("SELECT memories, lex_len_sum, changes FROM tenant_state WHERE tenant = %s",
                             [f.tenant]).fetchone()
        rows, len_sum, changes = (int(state[0]), int(state[1]), int(state[2])) if state else (0, 0, 0)
        return lexical.window(conn, f, list(terms), limit, own=own, rows=rows, len_sum=len_sum,
                              min_rows=self.prune_min_rows, sampled=self._sampled, changes=changes)

    @property
    def lexical_sample_rows(self) -> int:
        """A tenant of 4x as many rows estimates a common query word's count from this many newest rows."""
        return self._sampled.sample_rows

    @lexical_sample_rows.setter
    def lexical_sample_rows(self, rows: int) -> None:
        self._sampled.sample_rows = rows

    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        return self._with_conn(lambda c: lexical.phrases(c, f, list(phrases), limit), "lexical search")

    # ---- graph ----------------------------------------------------------------------------------
    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int, hub_degree: int,
                      children: int = 8) -> nx.MultiDiGraph:
        """The k-hop subgraph of :func:`graph.traversal.neighbourhood` (the rules every backend
        shares), frozen (callers share it), kept in an LRU of ``cache_entries`` subgraphs and
        rebuilt when the tenant's version moved (this or another replica wrote). The version is
        read before the walk: a write during it leaves an entry that the next read finds stale."""
        import networkx as nx

        key = (tenant, node, depth, max_nodes, hub_degree, children)
        version = self.version(tenant)
        with self._cache_lock:
            hit = self._hoods.get(key)
            if hit is not None and hit[0] == version:
                self._hoods.move_to_end(key)
                return hit[1]
        g = nx.freeze(neighbourhood(self, tenant, node, depth, max_nodes, hub_degree, children))
        with self._cache_lock:
            self._hoods[key] = (version, g)
            while len(self._hoods) > self.cache_entries:
                self._hoods.popitem(last=False)
        return g

    # ---- lifecycle ------------------------------------------------------------------------------
    def invalidate(self) -> None:
        """Drop the caches (agent names, subgraphs, nodes, lexical estimates); all also follow the tenant's
        version (the estimates its change clock)."""
        with self._cache_lock:
            self._agent_cache.clear()
            self._hoods.clear()
            self._cache.clear()
        self._sampled.forget()

    def close(self) -> None:
        """Stop the heartbeat and close the pool (idempotent)."""
        self._stop.set()
        if self._heartbeat.is_alive() and threading.current_thread() is not self._heartbeat:
            self._heartbeat.join(timeout=self.retry_s + 5)
        self.pool.close()

    def __enter__(self) -> PostgresGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read(self, fn: Callable[[psycopg.Connection[Any]], T], what: str = "read") -> T:
        return self._with_conn(fn, what)



if TYPE_CHECKING:  # mypy holds both classes to the Protocols
    def _is_store(s: PostgresGraphStore) -> GraphStore:
        return s

    def _is_txn(t: PgTxn) -> GraphTxn:
        return t
