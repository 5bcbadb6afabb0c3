"""The k-hop subgraph around a node, read from the edges table into a networkx MultiDiGraph.

Breadth-first, one query per hop for the frontier's edges (both directions, inside the
tenant). AGENT and SESSION nodes are hubs: one with more than ``hub_degree`` edges is kept
in the subgraph but not expanded, so a session of 100k memories costs one count, not 100k
rows. The walk stops at ``max_nodes``. Node attributes come from memories, episodes and
nodes, as ``graph/store.py`` put them on its in-memory graph.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from graph.api import AGENT, AGENT_MEMORY, EPISODE, SESSION
from graph.pg.rows import EPISODE_COLUMNS, EPISODE_SELECT, NODE_COLUMNS, NODE_SELECT, scalar

if TYPE_CHECKING:
    import networkx as nx
    from psycopg import Connection

_HUBS = ("agent:", "session:")


def neighbourhood(conn: Connection[Any], tenant: str, node: str, depth: int, max_nodes: int,
                  hub_degree: int) -> nx.MultiDiGraph:
    import networkx as nx

    g = nx.MultiDiGraph()
    if not _exists(conn, tenant, node):
        return g
    seen, frontier = {node}, [node]
    edges: set[tuple[str, str, str]] = set()
    for _hop in range(max(0, depth)):
        expand = [n for n in frontier if not n.startswith(_HUBS) or _degree(conn, tenant, n) <= hub_degree]
        if not expand:
            break
        rows = conn.execute(
            "SELECT src, dst, kind FROM edges WHERE src = ANY(%s) AND tenant = %s UNION "
            "SELECT src, dst, kind FROM edges WHERE dst = ANY(%s) AND tenant = %s ORDER BY 1, 2, 3",
            [expand, tenant, expand, tenant]).fetchall()
        nxt: list[str] = []
        for src, dst, kind in rows:
            for other in (src, dst):
                if other not in seen and len(seen) < max_nodes:
                    seen.add(other)
                    nxt.append(other)
            if src in seen and dst in seen:
                edges.add((src, dst, kind))
        frontier = nxt
    for name, attrs in _attributes(conn, tenant, seen).items():
        g.add_node(name, **attrs)
    for src, dst, kind in sorted(edges):
        if src in g and dst in g:
            g.add_edge(src, dst, key=kind, kind=kind)
    return g


def _exists(conn: Connection[Any], tenant: str, node: str) -> bool:
    return bool(scalar(conn.execute(
        "SELECT EXISTS (SELECT 1 FROM edges WHERE src = %s AND tenant = %s) OR "
        "EXISTS (SELECT 1 FROM edges WHERE dst = %s AND tenant = %s)", [node, tenant, node, tenant])))


def _degree(conn: Connection[Any], tenant: str, node: str) -> int:
    return int(scalar(conn.execute(
        "SELECT count(*) FROM (SELECT 1 FROM edges WHERE dst = %s AND tenant = %s LIMIT 100000) x", [node, tenant])))


def _attributes(conn: Connection[Any], tenant: str, names: set[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    mem_ids = [int(n[4:]) for n in names if n.startswith("mem:")]
    ep_ids = [int(n[3:]) for n in names if n.startswith("ep:")]
    mem_sql = f"SELECT {NODE_SELECT} FROM memories m WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s"
    for row in conn.execute(mem_sql, [mem_ids, tenant]):
        attrs = dict(zip(NODE_COLUMNS, row, strict=True))
        attrs["source"], attrs["metadata"] = json.loads(attrs["source"]), json.loads(attrs["metadata"])
        out[f"mem:{attrs['id']}"] = {**attrs, "kind": AGENT_MEMORY}
    for row in conn.execute(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = ANY(%s::bigint[]) AND tenant = %s",
                            [ep_ids, tenant]):
        attrs = dict(zip(EPISODE_COLUMNS, row, strict=True))
        out[f"ep:{attrs['id']}"] = {**attrs, "kind": EPISODE}
    others = [n for n in names if n.startswith(_HUBS)]
    for node_id, kind, attrs in conn.execute(
            "SELECT node_id, kind, attrs FROM nodes WHERE node_id = ANY(%s) AND tenant = %s", [others, tenant]):
        if kind in (AGENT, SESSION):
            out[node_id] = {"kind": kind, "tenant": tenant, **json.loads(attrs)}
    return out
