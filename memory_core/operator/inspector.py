"""Read-only views for the operator's web inspector (``tools.ui``): cheap at any store size.

Every read is tenant-scoped except :meth:`Inspector.tenants` (operator-wide by design, like
:func:`memory_core.operator.stats.list_tenants`). Operators see private (``visibility: "agent"``)
memories too, marked as such. Nothing here writes: the session summary is the cached
EPISODE when one exists (flagged stale when the session moved on) or an extractive summary
made on the spot and not stored, so a page never waits on a model.

Costs are bounded by what a page shows: day counts bisect the tenant's time index, session
lists compute details for one page of sessions, timelines page the session index by the
same ``(timestamp, id)`` cursor as ``query_recent_turns``, and a neighbourhood stops at a
node budget.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from graph.api import AGENT_MEMORY, EPISODE, SUPERSEDES, GraphStoreError, Key, mem_node, node_attrs
from memory_core import validation as v
from memory_core.entities.inspect import EntityView, operator_entity, operator_memory_entities
from memory_core.entities.service import ENTITY_REF
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.models import CheckResult, MemoryRow, from_us, iso
from memory_core.operator.stats import SessionSummary, episode_refs, latest_handoff_ref, list_tenants
from memory_core.reads import row_from_attrs
from memory_core.refs import EPISODE as EPISODE_KIND
from memory_core.refs import CursorPosition, memory_ref, parse_ref
from memory_core.sessions.episodes import SUMMARY_WINDOW, handoff_content, summary_turns
from memory_core.sessions.summary import extractive_summary
from memory_core.store_errors import graph_errors
from memory_core.versions.chain import MAX_CHAIN, newer_version

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

DAY_US = 86_400_000_000
GROWTH_DAYS = 30
MAX_PAGE = 100
MAX_GRAPH_DEPTH = 3
GRAPH_NODE_BUDGET = 120
GRAPH_CHILDREN = 8
HUB_DEGREE = 200  # past this many neighbours, an agent or session node is read through the time indexes
CHAIN_LIMIT = 50
LABEL_CHARS = 60
CHARS_TTL_S = 60.0


@dataclass(frozen=True)
class TenantOverview:
    tenant: str
    memories: int
    vectors: int  # memory vectors (episodes' apart)
    episodes: int
    episode_vectors: int
    sessions: int
    agents: int
    content_chars: int
    last_activity: str | None
    growth: list[int]  # memories added per UTC day, oldest first (see TenantsView.days)


@dataclass(frozen=True)
class TenantsView:
    tenants: list[TenantOverview]
    days: list[str]  # the UTC dates the growth counts cover


@dataclass(frozen=True)
class SessionsPage:
    sessions: list[SessionSummary]
    total: int
    offset: int


@dataclass(frozen=True)
class TimelinePage:
    rows: list[MemoryRow]
    next_cursor: str | None


@dataclass(frozen=True)
class SummaryPeek:
    summary: str
    source: str  # "model" or "fallback"
    error: str | None
    ref: str | None  # the stored episode; None when made on the spot
    stale: bool  # the stored episode predates the session's newest memory
    covers: int


@dataclass(frozen=True)
class MemoryDetail:
    check: CheckResult
    chain: list[MemoryRow]  # the SUPERSEDES chain through this memory, newest first
    entities: list[EntityView] = field(default_factory=list)  # every alias: the operator sees all


@dataclass(frozen=True)
class EntityFact:
    """A memory that mentions an entity: the newest of its versions that does, and the older
    versions that did (corrected by ``update_memory``: history, not current facts)."""

    row: MemoryRow
    older: list[MemoryRow] = field(default_factory=list)  # superseded versions, newest first
    current: str | None = None  # ``row`` superseded: the ref of the memory's current version (no longer mentioning it)


@dataclass(frozen=True)
class EntityDetail:
    entity: EntityView
    facts: list[EntityFact]  # newest first


@dataclass
class Neighbourhood:
    root: str
    nodes: list[dict[str, Any]] = field(default_factory=list)
    edges: list[dict[str, str]] = field(default_factory=list)
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"root": self.root, "nodes": self.nodes, "edges": self.edges, "truncated": self.truncated}


def _iso(ts_us: int | None) -> str | None:
    return None if ts_us is None else iso(from_us(ts_us))


def _page_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise InvalidInputError(f"'limit' must be an integer from 1 to {MAX_PAGE}.", field="limit")
    return limit


class Inspector:
    """The inspector's reads over an open store's parts (the serving core's: same stores, same locks)."""

    def __init__(self, parts: OperatorParts) -> None:
        self.parts = parts
        self.graph = parts.graph
        self._chars: tuple[float, dict[str, int]] | None = None
        self._chars_refreshing = False
        self._chars_lock = threading.Lock()

    # ---- tenants ---------------------------------------------------------------------------
    def tenants(self, days: int = GROWTH_DAYS) -> TenantsView:
        """Every tenant with counts, stored characters, last activity and memories per day over
        the ``days`` UTC days ending on the newest activity in the store."""
        summaries = list_tenants(self.parts)
        chars = self._stored_chars()
        newest = max((b[1][0] for t in summaries if (b := self.graph.bounds(t.tenant, None))), default=None)
        now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
        end_day = (newest if newest is not None else now_us) // DAY_US
        starts = [(end_day - days + 1 + i) * DAY_US for i in range(days + 1)]
        out = [TenantOverview(
            tenant=t.tenant, memories=t.memories, vectors=t.vectors, episodes=t.episodes,
            episode_vectors=t.episode_vectors, sessions=t.sessions, agents=t.agents,
            content_chars=chars.get(t.tenant, 0), last_activity=t.last_activity,
            growth=self.graph.counts_by_day(t.tenant, end_day - days + 1, days),
        ) for t in summaries]
        day_names = [from_us(s).date().isoformat() for s in starts[:-1]]
        return TenantsView(out, day_names)

    def _stored_chars(self) -> dict[str, int]:
        """Characters stored per tenant: an O(n) sum, so computed on a separate read-only SQLite
        connection (WAL readers block no writer), at most every ``CHARS_TTL_S`` and in the
        background after the first time: a page serves the last figure instead of waiting."""
        with self._chars_lock:
            cached, started = self._chars, self._chars_refreshing
            stale = cached is None or time.monotonic() - cached[0] > CHARS_TTL_S
            if stale and not started and cached is not None:
                self._chars_refreshing = True
                threading.Thread(target=self._refresh_chars, name="inspector-sizes", daemon=True).start()
        if cached is None:
            self._refresh_chars()
            cached = self._chars
        return dict(cached[1]) if cached else {}

    def _refresh_chars(self) -> None:
        try:
            sizes = self.parts.maintenance.content_chars()
            with self._chars_lock:
                self._chars = (time.monotonic(), sizes)
        except GraphStoreError:  # an unreadable store: the page shows no sizes rather than failing
            pass
        finally:
            with self._chars_lock:
                self._chars_refreshing = False

    def sessions(self, tenant: str, offset: int = 0, limit: int = 50) -> SessionsPage:
        """One page of the tenant's sessions, most recently active first."""
        tenant = v.tenant(tenant)
        limit = _page_limit(limit)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError("'offset' must be a non-negative integer.", field="offset")
        episodes = episode_refs(self.parts, tenant)
        stats = [s for s in self.graph.sessions(tenant) if s.first is not None and s.last is not None]
        order = sorted(stats, key=lambda s: s.last or (0, 0), reverse=True)
        page = [SessionSummary(
            session=s.session, memories=s.memories, turns=s.turns,
            first_activity=_iso(s.first[0] if s.first else None), last_activity=_iso(s.last[0] if s.last else None),
            latest_handoff=latest_handoff_ref(self.parts, tenant, s.session), episode=episodes.get(s.session),
        ) for s in order[offset:offset + limit]]
        return SessionsPage(page, len(order), offset)

    # ---- a session -------------------------------------------------------------------------
    def timeline(self, tenant: str, session: str, limit: int = 25, cursor: str | None = None) -> TimelinePage:
        """Every memory of the session (turns, handoffs, notes, private ones too), newest first,
        paged by an opaque cursor over ``(timestamp, id)`` like ``query_recent_turns``."""
        tenant = v.tenant(tenant)
        session = str(v.name(session, "session"))
        limit = _page_limit(limit)
        scope = f"timeline\x00{tenant}\x00{session}"
        before = None
        if cursor is not None:
            pos = self.parts.reader.cursors.decode(scope, cursor)
            before = (pos.ts_us, pos.id)
        keys = self.graph.page(tenant, session, before, limit + 1)
        more = len(keys) > limit
        keys = keys[:limit]
        rows = self.rows(tenant, [k[1] for k in keys])
        next_cursor = self.parts.reader.cursors.encode(scope, CursorPosition(*keys[-1])) if more and keys else None
        return TimelinePage(rows, next_cursor)

    def summary(self, tenant: str, session: str) -> SummaryPeek | None:
        """The session's miniSummary without writing or calling a model (None: no memories)."""
        tenant = v.tenant(tenant)
        session = str(v.name(session, "session"))
        bounds = self.graph.bounds(tenant, session)
        existing = self.graph.session_episode(tenant, session)
        if existing is not None:
            stale = bounds is not None and existing.last_id != bounds[1][1]
            return SummaryPeek(existing.summary, existing.summary_source, existing.summary_error,
                               f"ep:{existing.id}", stale, existing.turn_count)
        if bounds is None:
            return None
        keys: list[Key] = self.graph.page(tenant, session, None, SUMMARY_WINDOW)
        rows = self.parts.reader.rows(tenant, [k[1] for k in reversed(keys)], None)  # shared rows only
        handoff = handoff_content(self.graph, tenant, self.parts.episodes.latest_handoff(tenant, session, None))
        text = extractive_summary(summary_turns(rows), handoff, self.parts.settings.model_provider.max_summary_chars)
        return SummaryPeek(text, "fallback", "not summarized yet (extractive, not stored)", None, False, len(rows))

    # ---- a memory --------------------------------------------------------------------------
    def memory(self, tenant: str, ref: str, as_of: str | None = None) -> MemoryDetail:
        """Full row, neighbours (author, session, adjacent, edges) and the SUPERSEDES chain; ``as_of``
        (ISO-8601): the version of its chain that was valid at that instant."""
        tenant = v.tenant(tenant)
        parsed = parse_ref(ref)
        viewer = None
        if parsed.kind != EPISODE_KIND:
            attrs = self.graph.memory(tenant, parsed.id)
            if attrs is None:
                raise NotFoundError(f"No memory {parsed} in this tenant.", ref=str(parsed))
            viewer = attrs.agent if attrs.visibility == "agent" else None  # the operator sees it as its author
        with graph_errors("reading a memory"):
            check = self.parts.versions.check(tenant, str(parsed), viewer, as_of or None)
        chain: list[MemoryRow] = []
        entities: list[EntityView] = []
        if parsed.kind != EPISODE_KIND:
            chain = self.rows(tenant, self._chain(tenant, check.memory.id))
            entities = operator_memory_entities(self.graph, tenant, check.memory.id)
        return MemoryDetail(check, chain if len(chain) > 1 else [], entities)

    def review_due(self, tenant: str, limit: int = 50) -> list[MemoryRow]:
        """The tenant's current memories whose review_after has passed, the longest due first (private ones
        too: the operator's view)."""
        tenant = v.tenant(tenant)
        with graph_errors("reading the memories due for review"):
            nodes = self.graph.review_due(tenant, time.time_ns() // 1000, limit)
        return self.rows(tenant, [n.id for n in nodes])

    def entity(self, tenant: str, ref: str) -> EntityDetail:
        """An entity with every name and alias and the memories that mention it, newest first: one
        fact per memory, its superseded versions folded under the newest version that mentions it."""
        tenant = v.tenant(tenant)
        found = ENTITY_REF.match(ref.strip()) if isinstance(ref, str) else None
        if found is None:
            raise InvalidInputError("An entity is named by its ref (ent:<id>).", field="ref")
        view = operator_entity(self.graph, tenant, int(found.group(1)))
        if view is None:
            raise NotFoundError(f"No entity {ref} in this tenant.", ref=ref[:200])
        return EntityDetail(view, self._facts(tenant, self.rows(tenant, view.mentions)))

    def _facts(self, tenant: str, rows: list[MemoryRow]) -> list[EntityFact]:
        """``rows`` (newest first) grouped by version chain: each group under its newest row, which
        names the chain's current version when it is itself superseded (see :mod:`memory_core.versions`)."""
        groups: dict[int, list[MemoryRow]] = {}
        heads: dict[int, int] = {}  # id of a superseded row -> id of its chain's current version
        for row in rows:
            head = row.id if row.valid_to is None else self._current_version(tenant, row.id, heads)
            groups.setdefault(head, []).append(row)
        return [EntityFact(group[0], group[1:], None if group[0].id == head else memory_ref(head))
                for head, group in groups.items()]

    def _current_version(self, tenant: str, mem_id: int, known: dict[int, int]) -> int:
        """The current version of ``mem_id``'s chain (the operator reads private versions too); the
        last one found when the chain ends early (a deleted version). Memoised in ``known``."""
        walked: list[int] = []
        head = mem_id
        node = self.graph.memory(tenant, mem_id)
        while node is not None and node.id not in walked and len(walked) < MAX_CHAIN:
            if node.id in known:
                head = known[node.id]
                break
            head = node.id
            if node.valid_to_us is None:
                break
            walked.append(node.id)
            node = newer_version(self.graph, tenant, node, None, private_too=True)
        known.update(dict.fromkeys(walked, head))
        return head

    def _chain(self, tenant: str, mem_id: int) -> list[int]:
        """Newer handoffs (in-edges) then this one then older ones (out-edges), newest first."""
        def step(node_id: int | None, newer: bool) -> int | None:
            if node_id is None:
                return None
            edges = self.graph.edges_of(tenant, mem_node(node_id))
            want = "in" if newer else "out"
            found = [int(e.other.split(":", 1)[1]) for e in edges if e.kind == SUPERSEDES and e.direction == want]
            return found[0] if found else None

        newer: list[int] = []
        cur: int | None = mem_id
        while (cur := step(cur, True)) is not None and len(newer) < CHAIN_LIMIT and cur not in newer:
            newer.append(cur)
        older: list[int] = []
        cur = mem_id
        while (cur := step(cur, False)) is not None and len(older) < CHAIN_LIMIT and cur not in older:
            older.append(cur)
        return [*reversed(newer), mem_id, *older]

    def rows(self, tenant: str, ids: list[int]) -> list[MemoryRow]:
        """Rows for the tenant's memories among ``ids`` in order, private ones included."""
        nodes = self.graph.memories(tenant, ids)
        attrs = [a for a in (nodes.get(i) for i in ids) if a is not None]
        contents = self.graph.contents(tenant, (a.id for a in attrs))
        return [row_from_attrs(a, contents[a.id]) for a in attrs if a.id in contents]

    # ---- the graph around a node ---------------------------------------------------------------
    def neighbourhood(self, tenant: str, ref: str, depth: int = 1) -> Neighbourhood:
        """Nodes and edges within ``depth`` (1–3) hops of a memory or episode, breadth first,
        newest neighbours first, at most ``GRAPH_CHILDREN`` per node and ``GRAPH_NODE_BUDGET``
        in all. Adjacent memories of a session appear as ``NEXT`` edges (older → newer)."""
        tenant = v.tenant(tenant)
        if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_GRAPH_DEPTH:
            raise InvalidInputError(f"'depth' must be an integer from 1 to {MAX_GRAPH_DEPTH}.", field="depth")
        root = str(parse_ref(ref))
        if node_attrs(self.graph, tenant, root) is None:
            raise NotFoundError(f"No node {root} in this tenant.", ref=root)
        g = self.graph.neighbourhood(tenant, root, depth, GRAPH_NODE_BUDGET, HUB_DEGREE, GRAPH_CHILDREN)
        out = Neighbourhood(root, truncated=bool(g.graph.get("truncated")))
        out.nodes = self._describe(tenant, dict(g.nodes(data=True)))
        out.edges = [{"source": s, "target": t, "kind": k} for s, t, k in sorted(g.edges(keys=True))]
        if root.startswith("mem:"):  # the root memory's entities, one hop out (click through to their page)
            room = max(0, GRAPH_NODE_BUDGET - len(out.nodes))
            found = operator_memory_entities(self.graph, tenant, parse_ref(root).id)
            out.truncated = out.truncated or len(found) > room
            for e in found[:room]:
                out.nodes.append({"id": e.ref, "kind": "ENTITY", "depth": 1, "label": e.name[:LABEL_CHARS],
                                  "type": e.kind})
                out.edges.append({"source": root, "target": e.ref, "kind": "MENTIONS"})
        return out

    def agents(self, tenant: str) -> list[str]:
        """The tenant's agents, by name."""
        return sorted(self.graph.agents(v.tenant(tenant)))

    def session_names(self, tenant: str, limit: int = 100) -> list[str]:
        """The tenant's most recently active session names (for pickers)."""
        tenant = v.tenant(tenant)
        last = {s.session: s.last for s in self.graph.sessions(tenant) if s.last is not None}
        return sorted(last, key=last.__getitem__, reverse=True)[:limit]

    def _describe(self, tenant: str, nodes: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
        mem_ids = [a["id"] for a in nodes.values() if a.get("kind") == AGENT_MEMORY]
        contents = self.graph.contents(tenant, mem_ids)
        out = []
        for node, a in nodes.items():
            kind = str(a.get("kind", "?"))
            item: dict[str, Any] = {"id": node, "kind": kind, "depth": a["depth"]}
            if kind == AGENT_MEMORY:
                text = " ".join(contents.get(a["id"], "").split())
                item.update(type=a["type"], label=f"{a['type']} · {text[:LABEL_CHARS]}", agent=a["agent"],
                            session=a["session"], timestamp=_iso(a["ts_us"]), private=a["visibility"] == "agent")
            elif kind == EPISODE:
                item.update(type="episode", label=f"summary · {' '.join(str(a.get('summary', '')).split())[:40]}",
                            session=a.get("session"))
            else:
                item["label"] = str(a.get("agent") or a.get("session") or node)[:LABEL_CHARS]
            out.append(item)
        return out

    # ---- health ----------------------------------------------------------------------------
    def journal(self, limit: int = 50) -> tuple[int, list[dict[str, Any]]]:
        """Pending write-journal entries (interrupted adds/deletes) store-wide: count and the oldest."""
        entries = self.graph.journal(limit)
        return self.graph.journal_size(), [{"seq": e.seq, "op": e.op, "tenant": e.tenant, "ref": e.item_id,
                                            "at": _iso(e.created_us)} for e in entries]


__all__ = ["EntityDetail", "EntityFact", "Inspector", "MemoryDetail", "Neighbourhood", "SessionsPage", "SummaryPeek",
           "TenantOverview",
           "TenantsView", "TimelinePage"]
