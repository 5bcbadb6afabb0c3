"""Doctor's comparisons over rows any backend has read: the same rules on SQLite and PostgreSQL.

Each backend reads the rows its own way (a lock, a REPEATABLE READ snapshot); what counts as
missing structure, a dangling edge or a stale count is decided here, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from graph.api import AGENT, AUTHORED_BY, IN_SESSION, SESSION, agent_node, ep_node, mem_node, session_node
from graph.maintenance_api import DanglingEdge, EdgeRow, MissingStructure, NodeRow

CountKey = tuple[str, str, str]  # (tenant, scope, key)


def missing_structure(nodes: set[str], edges: set[tuple[str, str, str]],
                      memories: Iterable[tuple[Any, ...]]) -> list[MissingStructure]:
    """AGENT/SESSION nodes and AUTHORED_BY/IN_SESSION edges that (id, tenant, session, agent) rows imply
    but the store lacks (each node listed once)."""
    nodes = set(nodes)
    out: list[MissingStructure] = []
    for mem_id, tenant, session, agent in memories:
        ref = mem_node(int(mem_id))
        for node, kind, attrs, edge_kind in (
            (agent_node(tenant, agent), AGENT, {"agent": agent}, AUTHORED_BY),
            (session_node(tenant, session), SESSION, {"session": session}, IN_SESSION),
        ):
            if node not in nodes:
                nodes.add(node)
                out.append(MissingStructure(tenant, ref, node=NodeRow(node, kind, tenant, attrs)))
            if (ref, node, edge_kind) not in edges:
                out.append(MissingStructure(tenant, ref, edge=EdgeRow(ref, node, edge_kind, tenant)))
    return out


def node_owners(memories: Iterable[tuple[Any, ...]], episodes: Iterable[tuple[Any, ...]],
                nodes: Iterable[tuple[Any, ...]]) -> dict[str, str]:
    """The tenant of every node the rows name: memories (id, tenant, session, agent) with their
    author and session nodes, episodes (id, tenant), stored nodes (node_id, tenant)."""
    owner: dict[str, str] = {}
    for mem_id, tenant, session, agent in memories:
        owner[mem_node(int(mem_id))] = owner[agent_node(tenant, agent)] = str(tenant)
        owner[session_node(tenant, session)] = str(tenant)
    owner.update({ep_node(int(i)): str(t) for i, t in episodes})
    owner.update({str(n): str(t) for n, t in nodes})
    return owner


def dangling_edges(owner: Mapping[str, str], edges: Iterable[tuple[Any, ...]]) -> list[DanglingEdge]:
    """Edges (src, dst, kind, tenant) with an end that does not exist or belongs to another tenant."""
    out = []
    for src, dst, kind, tenant in edges:
        for end in (src, dst):
            found = owner.get(end)
            if found != tenant:
                out.append(DanglingEdge(EdgeRow(str(src), str(dst), str(kind), str(tenant)), str(end),
                                        foreign=found is not None))
                break
    return out


def stale_counts(kept: Mapping[CountKey, int], actual: Mapping[CountKey, int]) -> dict[str, list[str]]:
    """Per tenant, one line for each kept count that differs from the recount."""
    out: dict[str, list[str]] = {}
    for key in sorted(set(kept) | set(actual)):
        if kept.get(key, 0) != actual.get(key, 0):
            tenant, scope, name = key
            shown = name.replace("\x1f", "/")  # before repr, which would spell it \x1f
            out.setdefault(tenant, []).append(f"{scope} {shown!r}: kept {kept.get(key, 0)}, rows {actual.get(key, 0)}")
    return out
