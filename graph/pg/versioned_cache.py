"""What a PostgreSQL replica keeps of the rows a recall reads again and again (memory nodes, contents,
session neighbours, a session's bounds, the tenant's non-turn count): one LRU of ``cache_nodes``
entries shared by the concerns that read them, each entry labelled with its tenant's change counter.

The counter is ``tenant_state.version``, moved by every write transaction that touches the tenant, on
any replica. Before it answers, a cached read asks the database for that counter:

- every value wanted is cached under the current version: one tiny query, no rows decoded;
- otherwise the counter and the rows travel in one pipelined round trip (the version first, so
  the rows are at least as new as their label: a write landing in between only makes the next
  read refresh), and the entries are stored under that version.

So an add through replica A is visible through replica B's next read (read-your-writes across
replicas); only a change made behind the store's back (raw SQL that does not move the version)
could be missed, as by every other versioned cache of the store (subgraphs, agent names).

Inside :meth:`VersionedCache.consistent_reads` (one request: a recall) the thread checks a tenant's
version once and its later reads reuse it, so a recall's cached reads cost no round trip at all:
what was committed before the request began is still visible (the check runs after it began), and
a write through this store inside the block (the thread's own) ends the reuse.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import Connection

from graph.node_cache import LRU
from graph.pg.queries import PgQueries

VERSION_SQL = "SELECT version FROM tenant_state WHERE tenant = %s"
ABSENT = object()  # a cached "no such row in this tenant"


class VersionedCache:
    """Tenant versions (per request, see the module docstring) and the values labelled with them."""

    def __init__(self, q: PgQueries, capacity: int) -> None:
        self.q = q
        self.entries: LRU[tuple[str, str, Hashable], tuple[int, Any]] = LRU(capacity)
        self._scope = threading.local()  # .depth, .versions: this thread's request (consistent_reads)

    # ---- the request scope --------------------------------------------------------------------
    @contextmanager
    def consistent_reads(self, tenant: str) -> Iterator[None]:
        """See the module docstring; blocks nest (the outermost one's checks are shared)."""
        depth = getattr(self._scope, "depth", 0)
        if depth == 0:
            self._scope.versions = {}
        self._scope.depth = depth + 1
        try:
            yield
        finally:
            self._scope.depth = depth
            if depth == 0:
                self._scope.versions = {}

    def _scoped_versions(self) -> dict[str, int] | None:
        return self._scope.versions if getattr(self._scope, "depth", 0) else None

    def wrote(self) -> None:
        """This thread committed a write: its request's shared version checks are over."""
        if getattr(self._scope, "depth", 0):
            self._scope.versions = {}

    def _seen(self, tenant: str, version: int) -> None:
        scoped = self._scoped_versions()
        if scoped is not None:
            scoped[tenant] = max(version, scoped.get(tenant, version))

    # ---- versions and values ------------------------------------------------------------------
    def version(self, tenant: str) -> int:
        """The tenant's change counter: read, or the one this thread's request already checked."""
        scoped = self._scoped_versions()
        if scoped is not None and tenant in scoped:
            return scoped[tenant]
        rows = self.q.rows(VERSION_SQL, [tenant], "version read")
        version = int(rows[0][0]) if rows else 0
        self._seen(tenant, version)
        return version

    def _lookup(self, tenant: str, kind: str, keys: list[Hashable]) -> tuple[int, dict[Hashable, Any]] | None:
        """The cached values of ``keys`` when all share one version label, else None."""
        found: dict[Hashable, Any] = {}
        label: int | None = None
        for key in keys:
            entry = self.entries.get((tenant, kind, key))
            if entry is None or (label is not None and entry[0] != label):
                return None
            label = entry[0]
            found[key] = entry[1]
        return None if label is None else (label, found)

    def values(self, tenant: str, kind: str, keys: list[Hashable],
               fetch: Callable[[Connection[Any]], dict[Hashable, Any]]) -> dict[Hashable, Any]:
        """``keys``' values (``ABSENT`` for a missing one), cached or fetched with ``fetch``."""
        if self.entries.capacity == 0:
            return self.q.run(fetch, "read")
        cached = self._lookup(tenant, kind, keys)
        if cached is not None and self.version(tenant) == cached[0]:
            return cached[1]

        def both(conn: Connection[Any]) -> tuple[int, dict[Hashable, Any]]:
            with conn.pipeline():
                version = conn.execute(VERSION_SQL, [tenant])
                values = fetch(conn)
                row = version.fetchone()
            return (int(row[0]) if row else 0), values

        version, values = self.q.run(both, "read")
        self._seen(tenant, version)
        out = {key: values.get(key, ABSENT) for key in keys}
        for key, value in out.items():
            self.entries.put((tenant, kind, key), (version, value))
        return out

    def by_id(self, tenant: str, kind: str, ids: Iterable[int], query: str,
              convert: Callable[[tuple[Any, ...]], Any]) -> dict[int, Any]:
        """Per-id values: ``query`` takes (ids, tenant) and returns (id, *value columns) rows, each
        made a value by ``convert``; absent and foreign ids are left out."""
        wanted: list[Hashable] = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}

        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            return {int(r[0]): convert(r) for r in conn.execute(query, [wanted, tenant]).fetchall()}

        values = self.values(tenant, kind, wanted, fetch)
        return {int(k): v for k, v in values.items() if v is not ABSENT}  # type: ignore[call-overload]

    def clear(self) -> None:
        self.entries.clear()
