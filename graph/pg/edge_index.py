"""The PostgreSQL store's :class:`graph.api.EdgeIndex`: a node's edges (both ends the tenant's),
supersession, and k-hop neighbourhoods (walked by :func:`graph.traversal.neighbourhood` over the whole
store, frozen, kept per tenant version: a write through any replica rebuilds them)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from graph.api import SUPERSEDES, EdgeIndex, EdgeRef, GraphStore
from graph.pg.queries import PgQueries
from graph.traversal import neighbourhood

if TYPE_CHECKING:
    import networkx as nx


def owner_sql(node: str) -> str:
    """A SQL expression: the tenant owning the node whose id is the column ``node`` (a memory,
    an episode or a row of ``nodes``), NULL when it does not exist."""
    return (f"(CASE WHEN {node} ~ '^mem:[0-9]{{1,18}}$' THEN (SELECT tenant FROM memories WHERE id = "
            f"substr({node}, 5)::bigint) WHEN {node} ~ '^ep:[0-9]{{1,18}}$' THEN (SELECT tenant FROM episodes "
            f"WHERE id = substr({node}, 4)::bigint) WHEN {node} ~ '^ent:[0-9]{{1,18}}$' THEN (SELECT tenant FROM "
            f"entities "
            f"WHERE id = substr({node}, 5)::bigint) ELSE (SELECT tenant FROM nodes WHERE node_id = {node}) END)")


class PgEdgeIndex(EdgeIndex):
    """Edge reads; neighbourhoods walk ``graph`` (the store this index belongs to), ``cache_entries`` kept."""

    def __init__(self, q: PgQueries, graph: GraphStore, cache_entries: int) -> None:
        self.q = q
        self.graph = graph
        self.cache_entries = max(0, cache_entries)
        self._hoods: OrderedDict[tuple[str, str, int, int, int, int], tuple[int, nx.MultiDiGraph]] = OrderedDict()
        self._lock = threading.Lock()

    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]:
        """The node's edges whose both ends are the tenant's (as SQLite: an edge to a foreign or
        missing node is left out; a foreign node has no edges)."""
        rows = self.q.rows(f"SELECT e.dir, e.kind, e.other FROM (SELECT %s::text AS n, %s::text AS t) me, LATERAL "
                           f"(SELECT 'out' AS dir, kind, dst AS other FROM edges WHERE src = me.n AND tenant = me.t "
                           f"UNION ALL SELECT 'in', kind, src FROM edges WHERE dst = me.n AND tenant = me.t) e "
                           f"WHERE {owner_sql('me.n')} = me.t AND {owner_sql('e.other')} = me.t", [node, tenant])
        return [EdgeRef(r[0], str(r[1]), str(r[2])) for r in rows]

    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        wanted = [f"mem:{i}" for i in ids]
        out: dict[int, list[int]] = {}
        for src, dst in self.q.rows("SELECT src, dst FROM edges WHERE dst = ANY(%s) AND kind = %s AND tenant = %s "
                                    "ORDER BY src", [wanted, SUPERSEDES, tenant]):
            if str(src).startswith("mem:"):
                out.setdefault(int(str(dst)[4:]), []).append(int(str(src)[4:]))
        return out

    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int, hub_degree: int,
                      children: int = 8) -> nx.MultiDiGraph:
        """The k-hop subgraph of :func:`graph.traversal.neighbourhood` (the rules every backend
        shares), frozen (callers share it), kept in an LRU of ``cache_entries`` subgraphs and
        rebuilt when the tenant's version moved (this or another replica wrote). The version is
        read before the walk: a write during it leaves an entry that the next read finds stale."""
        import networkx as nx

        key = (tenant, node, depth, max_nodes, hub_degree, children)
        version = self.graph.version(tenant)
        with self._lock:
            hit = self._hoods.get(key)
            if hit is not None and hit[0] == version:
                self._hoods.move_to_end(key)
                return hit[1]
        g = nx.freeze(neighbourhood(self.graph, tenant, node, depth, max_nodes, hub_degree, children))
        with self._lock:
            self._hoods[key] = (version, g)
            while len(self._hoods) > self.cache_entries:
                self._hoods.popitem(last=False)
        return g

    def forget(self) -> None:
        with self._lock:
            self._hoods.clear()
