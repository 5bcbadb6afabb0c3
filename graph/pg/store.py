"""PostgresGraphStore: :class:`graph.api.GraphStore` over PostgreSQL, for N stateless replicas.

``PostgresGraphStore(dsn, owner=..., lease_s=30, pool_size=8)`` parses the DSN (a bad one is a
:class:`InvalidDSNError`, a ValueError), opens a psycopg pool, runs the migrations and starts the
journal's *heartbeat* thread (:mod:`graph.pg.journal`: leases, and what each replica may recover),
which runs until :meth:`close`.

Reads retry transient failures (connection lost, server restarting) for up to ``retry_s``
seconds (:mod:`graph.pg.queries`); :meth:`run` does the same for a whole write transaction.
:meth:`transaction` retries only getting a connection: a body that already ran is never replayed
behind the caller's back.

The store is its concerns composed: one object per narrow Protocol of :mod:`graph.api` (the same
module names as :mod:`graph.sqlite`), each holding what it reads through, and the store's own
lifecycle (meta, transactions, versions, closing). Each method of the GraphStore surface is its
concern's own, bound at construction. Every query takes the tenant, so a foreign id reads exactly
like a missing one. Counts come from the counter tables (O(1) or O(values), see
:mod:`graph.pg.counts`); order reads are index seeks on (tenant, session, ts_us, id). Semantics
follow :mod:`graph.sqlite.store` method by method.

The node cache never answers from a stale tenant: what a recall reads again and again (memory nodes,
contents, session neighbours, a session's bounds, the tenant's non-turn count) is kept in one
:class:`~graph.pg.versioned_cache.VersionedCache` that the concerns reading it share, each entry
labelled with the tenant's change counter (moved by every write on any replica) and checked against
it before it answers; :meth:`consistent_reads` lets one request check a tenant's version once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from graph.api import GraphStore, GraphTxn
from graph.pg.counts import PgCounts
from graph.pg.edge_index import PgEdgeIndex
from graph.pg.entity_index import PgEntityIndex
from graph.pg.episode_rows import PgEpisodeRows
from graph.pg.errors import retrying, wrap
from graph.pg.field_index import PgFieldIndex
from graph.pg.journal import PgJournal
from graph.pg.lexical import PgLexical
from graph.pg.memory_rows import PgMemoryRows
from graph.pg.migrations import migrate
from graph.pg.queries import PgQueries
from graph.pg.tenant_index import PgTenantIndex
from graph.pg.timeline import PgTimeline
from graph.pg.txn import PgTxn
from graph.pg.versioned_cache import VersionedCache
from graph.surface import ConcernSurface

T = TypeVar("T")


class InvalidDSNError(ValueError):
    """``storage.postgres_dsn`` does not parse (the message never repeats the DSN: it may hold a password)."""


def parse_dsn(dsn: str) -> dict[str, Any]:
    try:
        return conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:
        raise InvalidDSNError("storage.postgres_dsn is not a valid PostgreSQL connection string") from exc


class PostgresGraphStore(ConcernSurface):
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
        self.pool = ConnectionPool(kwargs={**params, "autocommit": True}, min_size=1, max_size=max(1, pool_size),
                                   timeout=retry_s, open=False, name=f"memcore-{owner}")
        self.queries = q = PgQueries(self.pool, self.retry_s)
        try:
            self.pool.open(wait=True, timeout=max(retry_s, 1.0))
            q.run(migrate, "migration", retry=False)
        except psycopg.Error as exc:
            self.pool.close()
            raise wrap(exc, "open") from exc
        except BaseException:
            self.pool.close()
            raise
        self.cache = VersionedCache(q, cache_nodes)
        self.timeline = PgTimeline(q, self.cache)
        self.memory_rows = PgMemoryRows(q, self.cache, self.timeline)
        self.episode_rows = PgEpisodeRows(q)
        self.counts = PgCounts(q, self.cache)
        self.field_index = PgFieldIndex(q, self.counts)
        self.edge_index = PgEdgeIndex(q, self, cache_entries)
        self.entity_index = PgEntityIndex(q)
        self.tenant_index = PgTenantIndex(q, self.cache)
        self.lexical = PgLexical(q)
        self.journal_log = PgJournal(q, owner=self.owner, lease_s=self.lease_s, succeeds=succeeds)

        # the GraphStore surface: each read is its concern's own method
        self.bind_surface(self.memory_rows, self.episode_rows, self.timeline, self.counts, self.field_index,
                          self.edge_index, self.entity_index, self.tenant_index, self.lexical, self.journal_log)

    # ---- connections and transactions -----------------------------------------------------------
    def read_with(self, fn: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """``fn`` on a pooled connection (autocommit; open a transaction for one snapshot), retried
        on transient failures; every failure leaves as a GraphStoreError naming ``what``."""
        return self.queries.run(fn, what)

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
            self.cache.wrote()

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

    # ---- lifecycle (graph.api.StoreLifecycle) --------------------------------------------------
    def version(self, tenant: str) -> int:
        return self.cache.version(tenant)

    def consistent_reads(self, tenant: str) -> AbstractContextManager[None]:
        """See :class:`~graph.pg.versioned_cache.VersionedCache`; blocks nest (the outermost one's checks
        are shared)."""
        return self.cache.consistent_reads(tenant)

    def meta(self, key: str) -> str | None:
        row = self.queries.run(lambda c: c.execute("SELECT value FROM meta WHERE key = %s", [key]).fetchone(),
                               "meta read")
        return None if row is None else str(row[0])

    def invalidate(self) -> None:
        """Drop the caches (agent names, subgraphs, nodes, lexical estimates); all also follow the tenant's
        version (the estimates its change clock)."""
        self.tenant_index.forget()
        self.edge_index.forget()
        self.cache.clear()
        self.lexical.forget()

    def close(self) -> None:
        """Stop the heartbeat and close the pool (idempotent)."""
        self.journal_log.stop(timeout_s=self.retry_s + 5)
        self.pool.close()

    def __enter__(self) -> PostgresGraphStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


if TYPE_CHECKING:  # mypy holds both classes to the Protocols
    def _is_store(s: PostgresGraphStore) -> GraphStore:
        return s

    def _is_txn(t: PgTxn) -> GraphTxn:
        return t
