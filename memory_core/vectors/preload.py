"""Loading, right after a server starts, the vector indexes its first recalls will need.

Chroma loads a tenant's whole HNSW index on the tenant's first query after its client was built
(3.7-8.3 s for 1M memories here), so the first recall of a big tenant after a restart paid for
it. A server loads them in the background instead (:meth:`MemoryCore.warm_up_in_background`):
its bound tenant when it has one (``server.tenant``), else the tenants whose memories are newest,
newest first, at most ``storage.preload_tenants`` of them and, on the embedded Chroma, only as
many as fit in ``storage.vector_cache_mb`` by the vector cache's own estimate (a preload never
makes the cache release anything). A tenant already loaded is skipped. While an index loads,
Chroma makes writes wait; the vector deadline allows for that (:mod:`memory_core.vectors.deadline`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from graph.api import GraphStore
from memory_core.errors import MemoryCoreError
from memory_core.observe.logs import TenantMode, tenant_label
from memory_core.vectors.api import VectorStore, index_loaded
from memory_core.vectors.cache import index_bytes

log = logging.getLogger("memory_core.vectors.preload")


def newest_tenants(graph: GraphStore, limit: int) -> list[str]:
    """The ``limit`` tenants whose newest memory is newest, newest first."""
    newest = [(bounds[1], tenant) for tenant in graph.tenants() if (bounds := graph.bounds(tenant, None))]
    return [tenant for _key, tenant in sorted(newest, reverse=True)[:limit]]


def preload_indexes(graph: GraphStore, vectors: VectorStore, tenants: Sequence[str], dimension: int,
                    budget_bytes: int, tenant_mode: TenantMode = "hash") -> list[str]:
    """Load the index of each of ``tenants`` in order, within ``budget_bytes`` (0: no bound) counting
    what is loaded already; returns the tenants loaded. A failure is logged and the tenant skipped:
    its first recall meets the same error, coded. The log names tenants as ``logs.tenant`` says."""
    probe = [1.0] + [0.0] * (dimension - 1)
    loaded: list[str] = []
    spent = sum(index_bytes(graph.count(t), dimension) for t in graph.tenants() if index_loaded(vectors, t)
                ) if budget_bytes else 0
    for tenant in tenants:
        if index_loaded(vectors, tenant):
            continue
        size = index_bytes(graph.count(tenant), dimension)
        if budget_bytes and spent + size > budget_bytes:
            continue  # a smaller one further down may still fit
        try:
            vectors.query(tenant, probe, 1)
        except MemoryCoreError as exc:
            log.warning("preloading a tenant's vector index failed (%s): %s", exc.code,
                        tenant_label(tenant, tenant_mode) or "tenant not logged")
            continue
        spent += size
        loaded.append(tenant)
    if loaded:
        names = [label for t in loaded if (label := tenant_label(t, tenant_mode)) is not None]
        shown = f": {', '.join(names)}" if names else ""
        log.info("preloaded the vector indexes of %d tenant(s)%s", len(loaded), shown)
    return loaded
