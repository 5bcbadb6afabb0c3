"""The graph store on one SQLite file (:class:`graph.api.GraphStore`), opened in O(1).

Nothing is read at open: every read is served by an index of the durable store (session
pages, neighbours, field listings, agents, idempotency keys, FTS) and by the counts the
write transaction keeps (:mod:`graph.sqlite.txn`). What a request touches is kept in bounded
caches — memory nodes in an LRU of ``cache_nodes`` entries, session neighbours, each tenant's
agent-name index, k-hop neighbourhoods as networkx graphs for traversal — so memory grows with
the working set, never with the store. Every read takes the tenant; a foreign id reads as missing.

The store is its concerns composed: one object per narrow Protocol of :mod:`graph.api` (the same
module names as :mod:`graph.pg`), each holding the connection and the cache it reads, and the
store's own lifecycle (meta, transactions, versions, closing). Each method of the GraphStore
surface is its concern's own, bound at construction. After a commit the store tells each concern
with a cache what the transaction did (:class:`graph.sqlite.txn.Effects`); one process owns the file,
so nothing else can change a row under those caches.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from typing import TYPE_CHECKING

from graph.api import GraphStore, GraphTxn
from graph.sqlite.counts import SqliteCounts
from graph.sqlite.db import GraphDB
from graph.sqlite.edge_index import SqliteEdgeIndex
from graph.sqlite.entity_index import SqliteEntityIndex
from graph.sqlite.episode_rows import SqliteEpisodeRows
from graph.sqlite.errors import sqlite_errors
from graph.sqlite.field_index import SqliteFieldIndex
from graph.sqlite.journal import SqliteJournal
from graph.sqlite.lexical import SqliteLexical
from graph.sqlite.memory_rows import SqliteMemoryRows
from graph.sqlite.queries import SqliteQueries
from graph.sqlite.tenant_index import SqliteTenantIndex
from graph.sqlite.timeline import SqliteTimeline
from graph.sqlite.txn import SqliteTxn
from graph.surface import ConcernSurface

DEFAULT_CACHE_NODES = 50_000


class SqliteGraphStore(ConcernSurface):
    """The concerns of one :class:`GraphDB`, composed; their caches follow this store's commits."""

    def __init__(self, db: GraphDB, *, cache_nodes: int = DEFAULT_CACHE_NODES) -> None:
        self.db = db
        q = SqliteQueries(db)
        self.timeline = SqliteTimeline(q, cache_nodes)
        self.memory_rows = SqliteMemoryRows(q, self.timeline, cache_nodes)
        self.episode_rows = SqliteEpisodeRows(q)
        self.counts = SqliteCounts(q, self.timeline)
        self.field_index = SqliteFieldIndex(q, self.counts)
        self.edge_index = SqliteEdgeIndex(q, self)
        self.entity_index = SqliteEntityIndex(q)
        self.tenant_index = SqliteTenantIndex(q)
        self.lexical = SqliteLexical(db)
        self.journal_log = SqliteJournal(q)
        self._versions: dict[str, int] = {}  # tenant -> writes seen in this process (cache keys)

        # the GraphStore surface: each read is its concern's own method
        self.bind_surface(self.memory_rows, self.episode_rows, self.timeline, self.counts, self.field_index,
                          self.edge_index, self.entity_index, self.tenant_index, self.lexical, self.journal_log)

    # ---- lifecycle (graph.api.StoreLifecycle) --------------------------------------------------
    def version(self, tenant: str) -> int:
        return self._versions.get(tenant, 0)

    def consistent_reads(self, tenant: str) -> AbstractContextManager[None]:
        """Nothing to share: one process owns the file, and its caches follow its own writes."""
        return nullcontext()

    def meta(self, key: str) -> str | None:
        with sqlite_errors():
            return self.db.meta(key)

    @contextmanager
    def transaction(self) -> Iterator[SqliteTxn]:
        try:
            with sqlite_errors(), self.db.transaction() as cur:
                txn = SqliteTxn(self.db, cur)
                yield txn
        except BaseException:
            self._forget_uncommitted_tables()
            raise
        self._after_commit(txn)

    def _forget_uncommitted_tables(self) -> None:
        """A rolled-back CREATE VIRTUAL TABLE must be forgotten (best effort: the store may be failing)."""
        with suppress(sqlite3.Error):
            self.db.reload_fts_names()

    def _after_commit(self, txn: SqliteTxn) -> None:
        fx = txn.effects
        with self.db.lock:
            self.timeline.committed(fx)
            self.memory_rows.committed(fx)
            self.lexical.committed(fx)
            self.tenant_index.committed(fx)
            for tenant in fx.tenants:
                self._versions[tenant] = self._versions.get(tenant, 0) + 1

    def invalidate(self) -> None:
        with self.db.lock:
            self.memory_rows.forget()
            self.timeline.forget()
            self.tenant_index.forget()
            self.edge_index.forget()
            self._versions = {t: v + 1 for t, v in self._versions.items()}
            self.lexical.forget()
            self.db.reload_fts_names()

    def close(self) -> None:
        self.db.close()


if TYPE_CHECKING:  # mypy holds the store to the seam
    def _is_store(s: SqliteGraphStore) -> GraphStore:
        return s

    def _is_txn(t: SqliteTxn) -> GraphTxn:
        return t
