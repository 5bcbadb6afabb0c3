"""The SQLite store's :class:`graph.api.MemoryRows`: a tenant's memories by id or idempotency key.

Memory nodes a request reads stay in a bounded LRU of ``cache_nodes`` entries (the working set, never
the store), which follows every commit of this process (:meth:`SqliteMemoryRows.committed`): one
process owns the file, so nothing else can change a row under it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from graph.api import MemoryNode, MemoryRows, Timeline
from graph.node_cache import LRU
from graph.sqlite.queries import SqliteQueries
from graph.sqlite.rows import NODE_SELECT, node_from_row

if TYPE_CHECKING:
    from graph.sqlite.txn import Effects

_CHUNK = 500


class SqliteMemoryRows(MemoryRows):
    """Memory nodes (cached) and contents by id; ``timeline`` lists a tenant's ids."""

    def __init__(self, q: SqliteQueries, timeline: Timeline, cache_nodes: int) -> None:
        self.q = q
        self.timeline = timeline
        self.nodes: LRU[int, MemoryNode] = LRU(cache_nodes)

    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        node = self.nodes.get(mem_id)
        if node is None:
            row = self.q.one(f"SELECT {NODE_SELECT} FROM memories WHERE id = ?", (mem_id,))
            if row is None:
                return None
            node = node_from_row(row)
            self.nodes.put(mem_id, node)
        return node if node.tenant == tenant else None

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        cached, missing = self.nodes.get_many(ids)
        out = {mem_id: node for mem_id, node in cached.items() if node.tenant == tenant}
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start:start + _CHUNK]
            # by primary key; the tenant is checked on each row
            for row in self.q.all(f"SELECT {NODE_SELECT} FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                                  chunk, tuples=True):
                node = node_from_row(row)
                self.nodes.put(node.id, node)
                if node.tenant == tenant:
                    out[node.id] = node
        return out

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        wanted = list(ids)
        out: dict[int, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            for mem_id, content, owner in self.q.all(
                f"SELECT id, content, tenant FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ):
                if owner == tenant:
                    out[mem_id] = content
        return out

    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None:
        row = self.q.one(f"SELECT {NODE_SELECT} FROM memories WHERE tenant = ? AND idempotency_key = ?", (tenant, key))
        return None if row is None else node_from_row(row)

    def memory_ids(self, tenant: str) -> list[int]:
        return [k[1] for k in self.timeline.iter_newest(tenant, None)]

    def review_due(self, tenant: str, now_us: int, limit: int) -> list[MemoryNode]:
        rows = self.q.all(f"SELECT {NODE_SELECT} FROM memories WHERE tenant = ? AND review_after_us <= ? "
                          "AND valid_to_us IS NULL ORDER BY review_after_us, id LIMIT ?", (tenant, now_us, limit),
                          tuples=True)
        return [node_from_row(r) for r in rows]

    def committed(self, fx: Effects) -> None:
        """The cache learns the committed rows: erased ones leave it, written ones replace theirs."""
        for _tenant, mem_id in fx.erased:
            self.nodes.discard(mem_id)
        for node in fx.written:
            self.nodes.put(node.id, node)

    def forget(self) -> None:
        self.nodes.clear()
