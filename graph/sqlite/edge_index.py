"""The SQLite store's :class:`graph.api.EdgeIndex`: a node's edges, supersession, and k-hop
neighbourhoods (walked by :func:`graph.traversal.neighbourhood` over the whole store, kept per
tenant version until the tenant's next write in this process)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from graph.api import SUPERSEDES, EdgeIndex, EdgeRef, GraphStore
from graph.node_cache import LRU
from graph.sqlite.queries import SqliteQueries
from graph.traversal import neighbourhood

if TYPE_CHECKING:
    import networkx as nx

NEIGHBOURHOODS = 64
_CHUNK = 500
# the partial index edges_supersedes serves only a query that names its kind as this literal
_CHAINED = f"tenant = ? AND kind = '{SUPERSEDES}'"


class SqliteEdgeIndex(EdgeIndex):
    """Edge reads; neighbourhoods walk ``graph`` (the store this index belongs to) and are cached."""

    def __init__(self, q: SqliteQueries, graph: GraphStore) -> None:
        self.q = q
        self.graph = graph
        self.neighbourhoods: LRU[tuple[Any, ...], nx.MultiDiGraph] = LRU(NEIGHBOURHOODS)

    def _node_tenant(self, conn: sqlite3.Connection, node: str) -> str | None:
        kind, _, rest = node.partition(":")
        if kind == "mem" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM memories WHERE id = ?", (int(rest),)).fetchone()
        elif kind == "ep" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM episodes WHERE id = ?", (int(rest),)).fetchone()
        elif kind == "ent" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM entities WHERE id = ?", (int(rest),)).fetchone()
        else:
            row = conn.execute("SELECT tenant FROM nodes WHERE node_id = ?", (node,)).fetchone()
        return None if row is None else str(row[0])

    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]:
        with self.q.connection() as conn:
            if self._node_tenant(conn, node) != tenant:
                return []
            out = [EdgeRef("out", k, d) for d, k in conn.execute(
                "SELECT dst, kind FROM edges WHERE src = ? AND tenant = ?", (node, tenant))]
            out += [EdgeRef("in", k, s) for s, k in conn.execute(
                "SELECT src, kind FROM edges WHERE dst = ? AND tenant = ?", (node, tenant))]
            return [e for e in out if self._node_tenant(conn, e.other) == tenant]

    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """On the partial index of SUPERSEDES edges (schema step 8): a tenant with no chain costs one
        seek, not one probe of the whole-table ``edges_dst`` index per id (recall asks ~200 ids)."""
        wanted = [f"mem:{i}" for i in ids]
        out: dict[int, list[int]] = {}
        with self.q.connection() as conn:
            if not wanted or conn.execute(f"SELECT 1 FROM edges INDEXED BY edges_supersedes WHERE {_CHAINED} "
                                          "LIMIT 1", (tenant,)).fetchone() is None:
                return out
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                for src, dst in conn.execute(f"SELECT src, dst FROM edges INDEXED BY edges_supersedes WHERE "
                                             f"{_CHAINED} AND dst IN ({','.join('?' * len(chunk))})",
                                             [tenant, *chunk]):
                    if str(src).startswith("mem:"):
                        out.setdefault(int(str(dst)[4:]), []).append(int(str(src)[4:]))
        return out

    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int, hub_degree: int,
                      children: int = 8) -> nx.MultiDiGraph:
        """Cached per (tenant, node, depth, budgets) until the tenant's next write in this process."""
        key = (tenant, node, depth, max_nodes, hub_degree, children, self.graph.version(tenant))
        found = self.neighbourhoods.get(key)
        if found is None:
            found = neighbourhood(self.graph, tenant, node, depth, max_nodes, hub_degree, children)
            self.neighbourhoods.put(key, found)
        return found

    def forget(self) -> None:
        self.neighbourhoods.clear()
