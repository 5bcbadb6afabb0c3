"""Tenant-scoped reads over the graph: rows, recent-turn pages, batch fetch, check.

Every function takes the tenant first and resolves ids through
:meth:`GraphStore.memory`, which returns nothing for another tenant's node: a foreign
ref or id reads exactly like a missing one.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Protocol

from graph.api import EntityIndex, EpisodeNode, GraphStore, Key, MemoryNode, agent_node, session_node
from memory_core.errors import InvalidInputError, InvalidRefError, NotFoundError, ScopeDeniedError
from memory_core.models import EPOCH, CheckResult, Contents, MemoryRow, RecentTurnsPage, from_us, iso
from memory_core.refs import EPISODE, CursorCodec, CursorPosition, episode_ref, memory_ref, parse_ref

EPISODE_AGENT = "memory-core"
EPISODE_SALIENCE = 0.6


def episode_row(a: EpisodeNode) -> MemoryRow:
    """An EPISODE as a row (ref ``ep:``, type ``episode``) for recall and get_contents."""
    return MemoryRow(
        ref=episode_ref(a.id), id=a.id, tenant=a.tenant, session=a.session, agent=EPISODE_AGENT,
        content=a.summary, type="episode", role=None, channel=None, source={}, project_id=None,
        salience=EPISODE_SALIENCE, visibility="tenant", timestamp=from_us(a.updated_us),
        metadata={"summary_source": a.summary_source, "summary_error": a.summary_error,
                  "turn_count": a.turn_count},
        content_len=len(a.summary), content_hash="",
    )


def episode_attrs(a: EpisodeNode) -> MemoryNode:
    """An EPISODE in the shape recall filters and scores read on memories."""
    return MemoryNode(
        id=a.id, tenant=a.tenant, session=a.session, agent=EPISODE_AGENT, type="episode", role=None, channel=None,
        source={}, source_id=None, project_id=None, salience=EPISODE_SALIENCE, visibility="tenant",
        ts_us=a.updated_us, metadata={}, content_len=len(a.summary), content_hash="", kind="EPISODE",
    )


def visible(attrs: MemoryNode, viewer: str | None) -> bool:
    """Private (visibility='agent') memories are shown only to the agent that wrote them."""
    return attrs.visibility != "agent" or (viewer is not None and attrs.agent == viewer)


def check_own(attrs: MemoryNode, actor: str | None, field: str) -> None:
    """Refuse (SCOPE_DENIED) a change to a memory ``actor`` did not write: what a write-scoped
    connection may correct, lock or delete is its own rows only. ``actor`` None (an unbound
    connection that named no agent) owns nothing; ``field`` is the argument that names it."""
    ref = memory_ref(attrs.id)
    if actor is None:
        raise ScopeDeniedError(
            f"A write-scoped connection changes only its own memories: name yourself as '{field}' (the author "
            f"of {ref}), or use an admin scope.", ref=ref, scope="write", needed="admin")
    if attrs.agent != actor:
        raise ScopeDeniedError(
            f"{ref} was written by agent '{attrs.agent}', not '{actor}'; a write-scoped connection changes only "
            "its own memories (an admin scope may change anyone's).", ref=ref, scope="write", needed="admin")


def row_from_attrs(attrs: MemoryNode, content: str, now_us: int | None = None) -> MemoryRow:
    """The row a caller sees of a memory; ``review_due`` when its review_after is past ``now_us`` (default now)."""
    review = attrs.review_after_us
    due = review is not None and review <= (time.time_ns() // 1000 if now_us is None else now_us)
    return MemoryRow(
        ref=memory_ref(attrs.id),
        id=attrs.id,
        tenant=attrs.tenant,
        session=attrs.session,
        agent=attrs.agent,
        content=content,
        type=attrs.type,
        role=attrs.role,
        channel=attrs.channel,
        source=dict(attrs.source),
        project_id=attrs.project_id,
        salience=attrs.salience,
        visibility=attrs.visibility,
        timestamp=from_us(attrs.ts_us),
        metadata=dict(attrs.metadata),
        content_len=attrs.content_len,
        content_hash=attrs.content_hash,
        supersedes=memory_ref(attrs.supersedes_id) if attrs.supersedes_id is not None else None,
        valid_to=from_us(attrs.valid_to_us) if attrs.valid_to_us is not None else None,
        locked=attrs.locked,
        valid_from=from_us(attrs.valid_from_us) if attrs.valid_from_us is not None else None,
        review_after=from_us(review) if review is not None else None,
        review_due=due,
        ended=None if attrs.end_reason is None else {"reason": attrs.end_reason, "by": attrs.ended_by},
        archived=from_us(attrs.archived_us) if attrs.archived_us is not None else None,
        provenance=attrs.provenance,
        flags=attrs.flags,
    )


MEMORY_ENTITY_CAP = 64  # a memory declares at most 32; the extractor adds a few more


def memory_entity_list(graph: EntityIndex, tenant: str, mem_id: int, viewer: str | None) -> list[dict[str, object]]:
    """The entities one memory mentions, as the viewer (who may read the memory) sees them: only
    names and aliases some memory it may read declared (see :mod:`graph.api`)."""
    ids = graph.memory_entities(tenant, [mem_id]).get(mem_id, [])[:MEMORY_ENTITY_CAP]
    nodes = [graph.entity(tenant, i, viewer) for i in ids]
    return [{"ref": n.ref, "name": n.name, "kind": n.kind, "aliases": list(n.aliases)} for n in nodes if n is not None]


class VersionAt(Protocol):
    """An ``as_of`` read's resolver: the version of a memory's chain valid at ``at_us`` that the reader may
    read (None: none was); :meth:`memory_core.versions.service.VersionService.at` makes one."""

    @property
    def at_us(self) -> int: ...

    def __call__(self, node: MemoryNode) -> MemoryNode | None: ...


class Reader:
    def __init__(self, graph: GraphStore, cursors: CursorCodec) -> None:
        self.graph = graph
        self.cursors = cursors

    def rows(self, tenant: str, ids: Iterable[int], viewer: str | None) -> list[MemoryRow]:
        """Rows for the tenant's visible memories among ``ids``, in the given order."""
        ids = list(ids)
        nodes = self.graph.memories(tenant, ids)
        attrs = [a for a in (nodes.get(i) for i in ids) if a is not None and visible(a, viewer)]
        contents = self.graph.contents(tenant, (a.id for a in attrs))
        return [row_from_attrs(a, contents[a.id]) for a in attrs if a.id in contents]

    def rows_any(self, tenant: str, ids: Iterable[int], viewer: str | None) -> list[MemoryRow]:
        """Rows for memories and episodes among ``ids`` (one id space), in the given order."""
        ids = list(ids)
        memories = {r.id: r for r in self.rows(tenant, ids, viewer)}
        out = []
        for i in ids:
            if i in memories:
                out.append(memories[i])
            elif (ep := self.graph.episode(tenant, i)) is not None:
                out.append(episode_row(ep))
        return out

    def turn_cursor(self, tenant: str, session: str, row: MemoryRow) -> str:
        """A cursor that continues a recent-turns page after ``row``."""
        ts_us = (row.timestamp - EPOCH) // timedelta(microseconds=1)
        return self.cursors.encode(f"turns\x00{tenant}\x00{session}", CursorPosition(ts_us, row.id))

    def recent_turns(
        self, tenant: str, session: str, limit: int, cursor: str | None, viewer: str | None
    ) -> RecentTurnsPage:
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise InvalidInputError("'limit' must be an integer from 1 to 100.", field="limit")
        scope = f"turns\x00{tenant}\x00{session}"
        before = None
        if cursor is not None:
            pos = self.cursors.decode(scope, cursor)
            before = (pos.ts_us, pos.id)

        keys: list[Key] = []
        while len(keys) <= limit:  # pages of the turn index, filtered by what the viewer may read
            page = self.graph.page(tenant, session, before, limit + 1, turns_only=True)
            nodes = self.graph.memories(tenant, (k[1] for k in page))
            keys += [k for k in page if (a := nodes.get(k[1])) is not None and visible(a, viewer)]
            if len(page) <= limit:
                break
            before = page[-1]
        more = len(keys) > limit
        keys = keys[:limit]
        turns = self.rows(tenant, (k[1] for k in keys), viewer)
        next_cursor = self.cursors.encode(scope, CursorPosition(*keys[-1])) if more and keys else None
        return RecentTurnsPage(turns, next_cursor)

    def get_contents(self, tenant: str, refs: Sequence[object], viewer: str | None,
                     at: VersionAt | None = None) -> Contents:
        """Resolve refs to full rows; malformed, foreign, hidden and deleted refs go to missing.
        ``at`` (an ``as_of`` read): each memory's version valid then (missing when none was), episodes
        written by then.

        Every requested ref is accounted for once per time it was asked, under the exact string
        the caller sent: as a found row (``requested`` keeps the caller's string, e.g. ' mem:6'
        for the row mem:6) or as an entry of ``missing``. A ref asked twice is answered twice.
        """
        wanted: list[tuple[str, int]] = []  # (the caller's string, id), in request order
        missing: list[str] = []
        for raw in refs:
            label = raw if isinstance(raw, str) else repr(raw)[:80]
            try:
                ref = parse_ref(raw)
            except InvalidRefError:
                missing.append(label)
                continue
            item_id = ref.id
            if ref.kind == EPISODE:
                ep = self.graph.episode(tenant, ref.id)
                found = ep is not None and (at is None or ep.created_us <= at.at_us)
            else:
                attrs = self.graph.memory(tenant, ref.id)
                found = attrs is not None and visible(attrs, viewer)
                if found and at is not None and attrs is not None:
                    then = at(attrs)
                    found, item_id = then is not None, then.id if then is not None else item_id
            if found:
                wanted.append((label, item_id))
            else:
                missing.append(label)
        rows = {row.id: row for row in self.rows_any(tenant, dict.fromkeys(i for _, i in wanted), viewer)}
        kept = [(label, rows[i]) for label, i in wanted if i in rows]
        return Contents([row for _, row in kept], missing, [label for label, _ in kept])

    def check(self, tenant: str, ref_text: object, viewer: str | None, at: VersionAt | None = None) -> CheckResult:
        """One memory with its neighbourhood; ``at`` (an ``as_of`` read): its version valid then."""
        ref = parse_ref(ref_text)
        if ref.kind == EPISODE:
            return self._check_episode(tenant, ref.id, viewer)
        attrs = self.graph.memory(tenant, ref.id)
        if attrs is None or not visible(attrs, viewer):
            raise NotFoundError(f"No memory {ref} in this tenant.", ref=str(ref))
        if at is not None:
            then = at(attrs)
            if then is None:
                raise NotFoundError(f"No version of {ref} was valid at {iso(from_us(at.at_us))}.", ref=str(ref))
            attrs, ref = then, parse_ref(memory_ref(then.id))
        row = self.rows(tenant, [ref.id], viewer)[0]
        turns = attrs.type == "turn"
        adjacent = {
            name: next(iter(self.rows(tenant, [k[1]], viewer)), None) if k else None
            for name, k in (
                ("previous", self._visible_neighbour(tenant, attrs, viewer, forward=False, turns=turns)),
                ("next", self._visible_neighbour(tenant, attrs, viewer, forward=True, turns=turns)),
            )
        }
        neighbours = {
            "author": {"node": agent_node(tenant, attrs.agent), "agent": attrs.agent},
            "session": {
                "node": session_node(tenant, attrs.session),
                "session": attrs.session,
                "memories": self._visible_count(tenant, attrs.session, viewer),
            },
            "previous": adjacent["previous"],
            "next": adjacent["next"],
            "edges": self._visible_edges(tenant, str(ref), viewer),
            "entities": memory_entity_list(self.graph, tenant, ref.id, viewer),
        }
        return CheckResult(row, neighbours)

    # Neighbourhoods show only what the viewer can read: another agent's private row is not
    # named, linked to or counted (a ref, an edge or a count would each reveal that it exists).
    def _visible_id(self, tenant: str, mem_id: int, viewer: str | None) -> bool:
        attrs = self.graph.memory(tenant, mem_id)
        return attrs is not None and visible(attrs, viewer)

    def _visible_neighbour(
        self, tenant: str, attrs: MemoryNode, viewer: str | None, *, forward: bool, turns: bool
    ) -> Key | None:
        """The nearest memory before (or after) this one in its session that the viewer can read
        (among turns only, for a turn)."""
        current: Key | None = attrs.key
        while current is not None:
            current = self.graph.adjacent(tenant, attrs.session, current, forward=forward, turns_only=turns)
            if current is not None and self._visible_id(tenant, current[1], viewer):
                return current
        return None

    def _visible_count(self, tenant: str, session: str, viewer: str | None) -> int:
        return self.graph.count(tenant, session) - self.graph.hidden_count(tenant, session, viewer)

    def _visible_edges(self, tenant: str, node: str, viewer: str | None) -> list[dict[str, str]]:
        out = []
        for edge in self.graph.edges_of(tenant, node):
            if edge.other.startswith("mem:") and not self._visible_id(tenant, int(edge.other[4:]), viewer):
                continue
            out.append({"direction": edge.direction, "kind": edge.kind, "node": edge.other})
        return out

    def _check_episode(self, tenant: str, ep_id: int, viewer: str | None) -> CheckResult:
        ep = self.graph.episode(tenant, ep_id)
        if ep is None:
            raise NotFoundError(f"No episode ep:{ep_id} in this tenant.", ref=f"ep:{ep_id}")

        def cover(mem_id: int | None) -> str | None:  # (a summary from before private rows were left out)
            hidden = mem_id and (a := self.graph.memory(tenant, mem_id)) is not None and not visible(a, viewer)
            return memory_ref(mem_id) if mem_id and not hidden else None

        neighbours = {
            "session": {"node": session_node(tenant, ep.session), "session": ep.session,
                        "memories": self._visible_count(tenant, ep.session, viewer)},
            "covers": {"first": cover(ep.first_id), "last": cover(ep.last_id)},
            "edges": self._visible_edges(tenant, f"ep:{ep_id}", viewer),
        }
        return CheckResult(episode_row(ep), neighbours)
