"""Operator reads: tenants, sessions, stats and graph neighbourhoods, for the CLI.

Everything here is tenant-scoped except :func:`list_tenants`, which is operator-wide by design
(it lists the tenants themselves). Operators see private (``visibility:
"agent"``) memories too: these are counts and shapes, not agent-facing recall.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.api import AGENT_MEMORY, EPISODE, GraphStore, node_attrs
from memory_core import validation as v
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.models import from_us, iso
from memory_core.refs import episode_ref, memory_ref, parse_ref
from memory_core.store_errors import graph_errors

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

MAX_DEPTH = 4
MAX_CHILDREN = 12
PREVIEW_CHARS = 60


def _iso(ts_us: int | None) -> str | None:
    return None if ts_us is None else iso(from_us(ts_us))


@dataclass(frozen=True)
class TenantSummary:
    tenant: str
    memories: int
    vectors: int  # memory vectors: agree with ``memories`` when the stores agree
    episodes: int  # session summaries (EPISODE nodes)
    episode_vectors: int  # their Chroma records: agree with ``episodes``
    sessions: int
    agents: int
    last_activity: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SessionSummary:
    session: str
    memories: int
    turns: int
    first_activity: str | None
    last_activity: str | None
    latest_handoff: str | None
    episode: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TenantStats:
    tenant: str
    memories: int
    by_type: dict[str, int]
    private: int
    sessions: int
    agents: list[str]
    episodes: int
    vectors: int | None  # memory vectors; None: not counted (opening Chroma costs seconds; doctor compares)
    episode_vectors: int | None  # the episodes' vectors; None: not counted
    disk_bytes: dict[str, int | None] = field(default_factory=dict)  # store-wide, all tenants

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _tree_size(path: Path) -> int | None:
    if not path.is_dir():
        return None
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def list_tenants(parts: OperatorParts) -> list[TenantSummary]:
    """Operator-wide: every tenant either store knows, with its counts."""
    graph = parts.graph
    out = []
    for tenant in sorted(set(parts.vectors.tenants()) | set(graph.tenants())):
        vectors, episode_vectors = _vector_counts(parts, tenant)
        bounds = graph.bounds(tenant, None)
        out.append(TenantSummary(
            tenant=tenant,
            memories=graph.count(tenant),
            vectors=vectors,
            episodes=len(graph.episodes(tenant)),
            episode_vectors=episode_vectors,
            sessions=len(graph.sessions(tenant)),
            agents=len(graph.agents(tenant)),
            last_activity=_iso(bounds[1][0]) if bounds else None,
        ))
    return out


def list_sessions(parts: OperatorParts, tenant: str) -> list[SessionSummary]:
    """The tenant's sessions, most recently active first."""
    tenant = v.tenant(tenant)
    episodes = episode_refs(parts, tenant)
    out = [SessionSummary(
        session=s.session,
        memories=s.memories,
        turns=s.turns,
        first_activity=_iso(s.first[0]) if s.first else None,
        last_activity=_iso(s.last[0]) if s.last else None,
        latest_handoff=latest_handoff_ref(parts, tenant, s.session),
        episode=episodes.get(s.session),
    ) for s in parts.graph.sessions(tenant)]
    return sorted(out, key=lambda s: s.last_activity or "", reverse=True)


def _vector_counts(parts: OperatorParts, tenant: str) -> tuple[int, int]:
    """(memory vectors, episode vectors) of the tenant: one collection holds both kinds, and
    each is compared with its own graph count (a summary is not a memory)."""
    total = parts.vectors.count(tenant)
    episodes = parts.vectors.count(tenant, {"kind": "episode"}) if total else 0
    return total - episodes, episodes


def tenant_stats(parts: OperatorParts, tenant: str, *, count_vectors: bool = True) -> TenantStats:
    """Memories by type, sessions, agents, episodes, vector records of each; disk use of each store.

    ``count_vectors=False`` leaves Chroma closed (``vectors`` is None): the graph alone answers.
    """
    tenant = v.tenant(tenant)
    graph = parts.graph
    with graph_errors("reading a tenant's stats"):
        by_type = graph.field_counts(tenant, "type")
        private, sessions = graph.private_count(tenant), len(graph.sessions(tenant))
        agents, episodes = sorted(graph.agents(tenant)), len(episode_refs(parts, tenant))
    vectors, episode_vectors = _vector_counts(parts, tenant) if count_vectors else (None, None)
    return TenantStats(
        tenant=tenant,
        memories=sum(by_type.values()),
        by_type=dict(sorted(by_type.items())),
        private=private,
        sessions=sessions,
        agents=agents,
        episodes=episodes,
        vectors=vectors,
        episode_vectors=episode_vectors,
        disk_bytes=disk_use(parts),
    )


def disk_use(parts: OperatorParts) -> dict[str, int | None]:
    """Bytes on disk of each local store (None: not local, e.g. Chroma in server mode)."""
    embedded = parts.settings.storage.chroma == "embedded"
    with graph_errors("measuring the graph store"):
        graph = parts.maintenance.disk_use()
    return {
        "chroma_dir": _tree_size(parts.data_dir / "chroma") if embedded else None,
        "graph_database": graph.database,  # the SQLite file, or the PostgreSQL database
        "graph_wal": graph.wal,
    }


def graph_neighbourhood(parts: OperatorParts, tenant: str, ref: str, depth: int = 1) -> dict[str, Any]:
    """The node's neighbourhood inside the tenant as a nested dict (for a tree view).

    Each node: ``{node, kind, label, edges: [{direction, kind, node: {...}}], more}``;
    nodes already shown are listed but not expanded again; ``more`` counts edges past
    the first ``MAX_CHILDREN``.
    """
    tenant = v.tenant(tenant)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 0 <= depth <= MAX_DEPTH:
        raise InvalidInputError(f"'depth' must be an integer from 0 to {MAX_DEPTH}.", field="depth")
    root = str(parse_ref(ref))
    if node_attrs(parts.graph, tenant, root) is None:
        raise NotFoundError(f"No node {root} in this tenant.", ref=root)
    return _expand(parts.graph, tenant, root, depth, {root})


def latest_handoff_ref(parts: OperatorParts, tenant: str, session: str) -> str | None:
    """The ref of the session's newest handoff, private ones included (the operator sees them)."""
    found = parts.episodes.latest_handoff(tenant, session, None, private_too=True)
    return None if found is None else memory_ref(found.id)


def episode_refs(parts: OperatorParts, tenant: str) -> dict[str, str]:
    """Each session's summary (its ``ep:`` ref), by session."""
    return {ep.session: episode_ref(ep.id) for ep in parts.graph.episodes(tenant)}


# ---- the neighbourhood tree ------------------------------------------------------------------
def _expand(graph: GraphStore, tenant: str, node: str, depth: int, seen: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"node": node, **_describe(graph, tenant, node), "edges": [], "more": 0}
    if depth == 0:
        return out
    edges = sorted(graph.edges_of(tenant, node), key=lambda e: _order(graph, tenant, e.other), reverse=True)
    out["more"] = max(0, len(edges) - MAX_CHILDREN)
    edges = edges[:MAX_CHILDREN]
    claimed = [e.other for e in edges if e.other not in seen]  # breadth first: nearest wins
    seen.update(claimed)
    for direction, kind, other in ((e.direction, e.kind, e.other) for e in edges):
        if other in claimed:
            claimed.remove(other)
            child = _expand(graph, tenant, other, depth - 1, seen)
        else:
            child = {"node": other, **_describe(graph, tenant, other), "edges": [], "more": 0, "seen": True}
        out["edges"].append({"direction": direction, "kind": kind, "node": child})
    return out


def _order(graph: GraphStore, tenant: str, node: str) -> tuple[int, int]:
    attrs = node_attrs(graph, tenant, node) or {}
    return (attrs.get("ts_us", 0), attrs.get("id", 0))


def _describe(graph: GraphStore, tenant: str, node: str) -> dict[str, Any]:
    attrs = node_attrs(graph, tenant, node) or {}
    kind = str(attrs.get("kind", "?"))
    if kind == AGENT_MEMORY:
        text = graph.contents(tenant, [attrs["id"]]).get(attrs["id"], "")
        preview = " ".join(text.split())[:PREVIEW_CHARS]
        label = f"{attrs['type']} · {attrs['session']} · {attrs['agent']} · {_iso(attrs['ts_us'])} · {preview}"
        return {"kind": kind, "label": label}
    if kind == EPISODE:
        detail = f"{attrs.get('session')} · {attrs.get('summary_source')} summary · {attrs.get('summary', '')}"
    else:
        detail = attrs.get("agent") or attrs.get("session") or ""
    return {"kind": kind, "label": " ".join(str(detail).split())[:PREVIEW_CHARS]}


__all__ = ["SessionSummary", "TenantStats", "TenantSummary", "disk_use", "episode_refs", "graph_neighbourhood",
           "latest_handoff_ref", "list_sessions", "list_tenants", "tenant_stats"]
