"""k-hop neighbourhoods as networkx graphs, read through any :class:`graph.api.GraphStore`.

Breadth first from a root node: at most ``children`` edges per node (newest other end first,
author and session first of all), ``max_nodes`` nodes in all. Adjacent memories of a session
are linked by ``NEXT`` edges (older → newer). A busy AGENT or SESSION node (more than
``hub_degree`` memories) is read through the ordered indexes, so a hub costs what the view
shows, not its degree. Node attributes: ``kind``, ``depth`` and the node's own fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graph.api import (
    AGENT,
    AGENT_MEMORY,
    AUTHORED_BY,
    EPISODE,
    IN_SESSION,
    SESSION,
    SUMMARIZES,
    GraphStore,
    ep_node,
    mem_node,
    node_attrs,
)

if TYPE_CHECKING:
    import networkx as nx

NEXT = "NEXT"
Edge = tuple[str, str, str]  # (source, target, kind)


def _hub_edges(store: GraphStore, tenant: str, node: str, attrs: dict[str, Any], children: int) -> list[Edge]:
    out: list[Edge] = []
    if attrs["kind"] == SESSION:
        if (ep := store.session_episode(tenant, attrs["session"])) is not None:
            out.append((ep_node(ep.id), node, SUMMARIZES))
        out += [(mem_node(k[1]), node, IN_SESSION) for k in store.page(tenant, attrs["session"], None, children + 1)]
        return out
    return [(mem_node(i), node, AUTHORED_BY) for i in store.field_ids(tenant, "agent", attrs["agent"], children + 1)]


def _degree(store: GraphStore, tenant: str, attrs: dict[str, Any]) -> int:
    if attrs["kind"] == SESSION:
        return store.count(tenant, attrs["session"])
    return store.field_count(tenant, "agent", attrs["agent"])


def _edges(store: GraphStore, tenant: str, node: str, attrs: dict[str, Any], children: int,
           hub_degree: int, seen: dict[str, dict[str, Any] | None]) -> list[Edge]:
    if attrs["kind"] in (AGENT, SESSION) and _degree(store, tenant, attrs) > hub_degree:
        return _hub_edges(store, tenant, node, attrs, children)
    out: list[Edge] = [(node, e.other, e.kind) if e.direction == "out" else (e.other, node, e.kind)
                       for e in store.edges_of(tenant, node)]
    if attrs["kind"] == AGENT_MEMORY:
        key = (attrs["ts_us"], attrs["id"])
        prev = store.adjacent(tenant, attrs["session"], key, forward=False)
        nxt = store.adjacent(tenant, attrs["session"], key, forward=True)
        if prev:
            out.append((mem_node(prev[1]), node, NEXT))
        if nxt:
            out.append((node, mem_node(nxt[1]), NEXT))

    def newest(edge: Edge) -> tuple[int, int, int]:
        other_id = edge[1] if edge[0] == node else edge[0]
        if other_id not in seen:
            seen[other_id] = node_attrs(store, tenant, other_id)
        other = seen[other_id] or {}
        structural = other.get("kind") not in (AGENT_MEMORY, EPISODE)  # author/session nodes first
        return (structural, other.get("ts_us") or other.get("updated_us") or 0, other.get("id") or 0)

    return sorted(out, key=newest, reverse=True)


def neighbourhood(store: GraphStore, tenant: str, root: str, depth: int, max_nodes: int, hub_degree: int,
                  children: int = 8) -> nx.MultiDiGraph:
    """The subgraph within ``depth`` hops of ``root`` (empty when root is not the tenant's);
    ``graph.graph["truncated"]`` says whether a budget cut it."""
    import networkx as nx

    g = nx.MultiDiGraph(truncated=False)
    seen: dict[str, dict[str, Any] | None] = {root: node_attrs(store, tenant, root)}
    if seen[root] is None:
        return g
    depths = {root: 0}
    level = [root]
    for d in range(depth):
        nxt: list[str] = []
        for node in level:
            attrs = seen.get(node) or node_attrs(store, tenant, node)
            if attrs is None:
                continue
            edges = _edges(store, tenant, node, attrs, children, hub_degree, seen)
            if len(edges) > children:
                g.graph["truncated"] = True
            for src, dst, kind in edges[:children]:
                other = dst if src == node else src
                if other not in depths:
                    if len(depths) >= max_nodes:
                        g.graph["truncated"] = True
                        continue
                    depths[other] = d + 1
                    nxt.append(other)
                g.add_edge(src, dst, key=kind, kind=kind)
        level = nxt
    for node, dist in depths.items():
        attrs = seen.get(node) if node in seen else node_attrs(store, tenant, node)
        g.add_node(node, depth=dist, **(attrs or {"kind": "?"}))
    return g
