"""A replica's node cache on PostgreSQL that never answers from a stale tenant.

:class:`CachedReads` keeps what a recall reads again and again (memory nodes, contents, session
neighbours, superseders, a session's bounds, the tenant's non-turn count) in one LRU of
``cache_nodes`` entries, each labelled with the tenant's change counter (``tenant_state.version``,
moved by every write transaction that touches the tenant, on any replica). Before it answers, a
cached read asks the database for that counter:

- every value wanted is cached under the current version: one tiny query, no rows decoded;
- otherwise the counter and the rows travel in one pipelined round trip (the version first, so
  the rows are at least as new as their label: a write landing in between only makes the next
  read refresh), and the entries are stored under that version.

So an add through replica A is visible through replica B's next read (read-your-writes across
replicas); only a change made behind the store's back (raw SQL that does not move the version)
could be missed, as by every other versioned cache of the store (subgraphs, agent names).

Inside :meth:`CachedReads.consistent_reads` (one request: a recall) the thread checks a tenant's
version once and its later reads reuse it, so a recall's cached reads cost no round trip at all:
what was committed before the request began is still visible (the check runs after it began),
and a write through this store inside the block (the thread's own) ends the reuse.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import Connection

from graph.api import Key, MemoryNode
from graph.node_cache import LRU
from graph.pg.reads import Reads

VERSION_SQL = "SELECT version FROM tenant_state WHERE tenant = %s"
_ABSENT = object()  # a cached "no such row in this tenant"
# each memory's neighbours in its session by (ts_us, id): (id, previous ts/id, next ts/id)
ADJACENT_SQL = (
    "SELECT m.id, p.ts_us, p.id, n.ts_us, n.id FROM memories m "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) < (m.ts_us, m.id) ORDER BY x.ts_us DESC, x.id DESC LIMIT 1) p ON true "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) > (m.ts_us, m.id) ORDER BY x.ts_us, x.id LIMIT 1) n ON true "
    "WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s")


class CachedReads(Reads):
    """:class:`graph.pg.reads.Reads` with the versioned node cache (see the module docstring)."""

    def __init__(self, cache_nodes: int = 50_000) -> None:
        super().__init__()
        self._cache: LRU[tuple[str, str, Hashable], tuple[int, Any]] = LRU(cache_nodes)
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

    # ---- the mechanism ------------------------------------------------------------------------
    def version(self, tenant: str) -> int:
        return self._current(tenant)

    def _current(self, tenant: str) -> int:
        scoped = self._scoped_versions()
        if scoped is not None and tenant in scoped:
            return scoped[tenant]
        rows = self._q(VERSION_SQL, [tenant], "version read")
        version = int(rows[0][0]) if rows else 0
        self._seen(tenant, version)
        return version

    def _lookup(self, tenant: str, kind: str, keys: list[Hashable]) -> tuple[int, dict[Hashable, Any]] | None:
        """The cached values of ``keys`` when all share one version label, else None."""
        found: dict[Hashable, Any] = {}
        label: int | None = None
        for key in keys:
            entry = self._cache.get((tenant, kind, key))
            if entry is None or (label is not None and entry[0] != label):
                return None
            label = entry[0]
            found[key] = entry[1]
        return None if label is None else (label, found)

    def _versioned(self, tenant: str, kind: str, keys: list[Hashable],
                   fetch: Callable[[Connection[Any]], dict[Hashable, Any]]) -> dict[Hashable, Any]:
        """``keys``' values (``_ABSENT`` for a missing one), cached or fetched with ``fetch``."""
        if self._cache.capacity == 0:
            return self._read(fetch, "read")
        cached = self._lookup(tenant, kind, keys)
        if cached is not None and self._current(tenant) == cached[0]:
            return cached[1]

        def both(conn: Connection[Any]) -> tuple[int, dict[Hashable, Any]]:
            with conn.pipeline():
                version = conn.execute(VERSION_SQL, [tenant])
                values = fetch(conn)
                row = version.fetchone()
            return (int(row[0]) if row else 0), values

        version, values = self._read(both, "read")
        self._seen(tenant, version)
        out = {key: values.get(key, _ABSENT) for key in keys}
        for key, value in out.items():
            self._cache.put((tenant, kind, key), (version, value))
        return out

    def _ids(self, tenant: str, kind: str, ids: Iterable[int], query: str) -> dict[int, Any]:
        """Per-id values: ``query`` takes (ids, tenant) and returns (id, *value columns) rows."""
        wanted: list[Hashable] = list(dict.fromkeys(int(i) for i in ids))
        if not wanted:
            return {}
        convert = _CONVERT[kind]

        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            return {int(r[0]): convert(r) for r in conn.execute(query, [wanted, tenant]).fetchall()}

        values = self._versioned(tenant, kind, wanted, fetch)
        return {int(k): v for k, v in values.items() if v is not _ABSENT}  # type: ignore[call-overload]

    # ---- the cached reads ---------------------------------------------------------------------
    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        return self.memories(tenant, [mem_id]).get(mem_id)

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        from graph.pg.rows import NODE_SELECT

        return self._ids(tenant, "node", ids,
                         f"SELECT m.id, {NODE_SELECT} FROM memories m WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s")

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        return self._ids(tenant, "content", ids,
                         "SELECT id, content FROM memories WHERE id = ANY(%s::bigint[]) AND tenant = %s")

    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        return self._ids(tenant, "adjacent", [n.id for n in nodes if n.tenant == tenant], ADJACENT_SQL)

    def non_turn_count(self, tenant: str) -> int:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            row = conn.execute("SELECT non_turn FROM tenant_state WHERE tenant = %s", [tenant]).fetchone()
            return {"": int(row[0]) if row else 0}

        return int(self._versioned(tenant, "non_turn", [""], fetch)[""])

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            where, args = ("tenant = %s", [tenant]) if session is None else (
                "tenant = %s AND session = %s", [tenant, session])
            cursors = [conn.execute(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us{o}, id{o} LIMIT 1",
                                    args) for o in ("", " DESC")]
            ends = [cur.fetchone() for cur in cursors]
            if ends[0] is None or ends[1] is None:
                return {session: None}
            return {session: ((int(ends[0][0]), int(ends[0][1])), (int(ends[1][0]), int(ends[1][1])))}

        value = self._versioned(tenant, "bounds", [session], fetch)[session]
        return None if value is _ABSENT else value


def _node(row: tuple[Any, ...]) -> MemoryNode:
    from graph.pg.rows import memory_node

    return memory_node(row[1:])


def _adjacent(row: tuple[Any, ...]) -> tuple[Key | None, Key | None]:
    return (None if row[1] is None else (int(row[1]), int(row[2])),
            None if row[3] is None else (int(row[3]), int(row[4])))


_CONVERT: dict[str, Callable[[tuple[Any, ...]], Any]] = {
    "node": _node,
    "content": lambda r: str(r[1]),
    "adjacent": _adjacent,
}
