"""The PostgreSQL store's :class:`graph.api.MemoryRows`: a tenant's memories by id (nodes and contents
through the replica's versioned cache, :mod:`graph.pg.versioned_cache`) or idempotency key."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graph.api import MemoryNode, MemoryRows, Timeline
from graph.pg.queries import PgQueries
from graph.pg.rows import NODE_SELECT, memory_node
from graph.pg.versioned_cache import VersionedCache

_NODES = f"SELECT m.id, {NODE_SELECT} FROM memories m WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s"
_CONTENTS = "SELECT id, content FROM memories WHERE id = ANY(%s::bigint[]) AND tenant = %s"


def _node(row: tuple[Any, ...]) -> MemoryNode:
    return memory_node(row[1:])


def _content(row: tuple[Any, ...]) -> str:
    return str(row[1])


class PgMemoryRows(MemoryRows):
    """Memory nodes and contents by id (cached per tenant version); ``timeline`` lists a tenant's ids."""

    def __init__(self, q: PgQueries, cache: VersionedCache, timeline: Timeline) -> None:
        self.q = q
        self.cache = cache
        self.timeline = timeline

    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        return self.memories(tenant, [mem_id]).get(mem_id)

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        return self.cache.by_id(tenant, "node", ids, _NODES, _node)

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        return self.cache.by_id(tenant, "content", ids, _CONTENTS, _content)

    def review_due(self, tenant: str, now_us: int, limit: int) -> list[MemoryNode]:
        rows = self.q.rows(f"SELECT {NODE_SELECT} FROM memories m WHERE m.tenant = %s AND m.review_after_us <= %s "
                           "AND m.valid_to_us IS NULL ORDER BY m.review_after_us, m.id LIMIT %s",
                           [tenant, now_us, limit])
        return [memory_node(r) for r in rows]

    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None:
        rows = self.q.rows(f"SELECT {NODE_SELECT} FROM memories m WHERE m.tenant = %s AND m.idempotency_key = %s",
                           [tenant, key])
        return memory_node(rows[0]) if rows else None

    def memory_ids(self, tenant: str) -> list[int]:
        return [k[1] for k in self.timeline.iter_newest(tenant, None)]
