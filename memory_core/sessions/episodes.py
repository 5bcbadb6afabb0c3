"""Sessions summarized into EPISODE nodes, handoff chains, and post-compaction recovery.

A session's episode (``ep:<id>``) holds its miniSummary, the id range it covers and where
the summary came from (``model`` or ``fallback`` with the reason). It is cached: asking
again without new memories in the session returns it unchanged. The model call happens
outside every lock and never on the add path, so a slow provider cannot block writes.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from typing import Any

from graph.api import SUPERSEDES, EpisodeNode, GraphStore, GraphTxn, Key, MemoryNode, MemoryRows, mem_node
from memory_core import validation as v
from memory_core.embedding.api import Embedder
from memory_core.errors import NotFoundError
from memory_core.models import AddResult, MemoryRow, RecentTurnsPage, from_us, iso
from memory_core.reads import EPISODE_AGENT, EPISODE_SALIENCE, Reader, visible
from memory_core.refs import episode_ref, memory_ref
from memory_core.sessions.summary import SummaryProvider, SummaryTurn, extractive_summary, summarize_with_fallback
from memory_core.settings.schema import Settings
from memory_core.vectors.api import Metadata, VectorStore
from memory_core.vectors.switch import stamp, still_current
from memory_core.write.path import WritePath
from memory_core.write.request import AddItem, MemoryFields

SUMMARY_WINDOW = 200  # newest turns a summary reads
PAGE = 256  # keys read at a time when a session is scanned newest first
TURN_ROW_OVERHEAD_CHARS = 200  # ≈ the JSON fields of one turn row in an MCP response


SUMMARY_PENDING = "model summary pending"  # recover_context did not wait for the model
SUMMARY_NOT_STORED = "read-only: summary not stored"  # recover_context on a connection that may not write


@dataclass(frozen=True)
class Episode:
    ref: str | None  # None: an extractive summary made for recover_context, not stored yet
    tenant: str
    session: str
    summary: str
    summary_source: str
    summary_error: str | None
    first_ref: str | None
    last_ref: str | None
    turn_count: int
    updated: Any
    cached: bool = False
    stale: bool = False  # the session has newer memories; a refresh is under way

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ref": self.ref, "session": self.session, "summary": self.summary,
            "summary_source": self.summary_source, "covers": {"first": self.first_ref, "last": self.last_ref},
            "turn_count": self.turn_count, "updated": iso(self.updated), "cached": self.cached,
        }
        if self.summary_error:
            out["summary_error"] = self.summary_error
        if self.stale:
            out["stale"] = True
        return out


@dataclass(frozen=True)
class Recovery:
    """What an agent needs after a compaction, in one call."""

    handoff: MemoryRow | None
    episode: Episode | None
    turns: RecentTurnsPage


def episode_from_attrs(a: EpisodeNode, cached: bool = False) -> Episode:
    return Episode(
        ref=episode_ref(a.id), tenant=a.tenant, session=a.session, summary=a.summary,
        summary_source=a.summary_source, summary_error=a.summary_error,
        first_ref=memory_ref(a.first_id) if a.first_id else None,
        last_ref=memory_ref(a.last_id) if a.last_id else None,
        turn_count=a.turn_count, updated=from_us(a.updated_us), cached=cached,
    )


def episode_vector_metadata(row: dict[str, Any]) -> Metadata:
    """Filterable metadata of an episode's Chroma record (doctor re-embeds with it too)."""
    return {"tenant": row["tenant"], "session": row["session"], "type": "episode", "kind": "episode",
            "agent": EPISODE_AGENT, "visibility": "tenant", "ts_us": row["updated_us"],
            "salience": EPISODE_SALIENCE, "project_id": ""}


class EpisodeService:
    def __init__(
        self, graph: GraphStore, reader: Reader, writer: WritePath, vectors: VectorStore, embedder: Embedder,
        settings: Settings, provider: SummaryProvider | None,
    ) -> None:
        self.graph = graph
        self.reader = reader
        self.writer = writer
        self.vectors = vectors
        self.embedder = embedder
        self.settings = settings
        self.provider = provider
        self.provider_settings = settings.model_provider
        # model summaries for recover_context are refreshed here, so recovery never waits long
        self._refresher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="episode-refresh")
        self._refreshing: dict[tuple[str, str], Future[Episode]] = {}
        self._refresh_lock = threading.Lock()

    def close(self) -> None:
        """Let an in-flight refresh finish writing (bounded by the provider's total timeout)."""
        self._refresher.shutdown(wait=True, cancel_futures=True)

    # ---- handoffs --------------------------------------------------------------------------
    def latest_handoff(self, tenant: str, session: str, viewer: str | None, *,
                       private_too: bool = False) -> MemoryNode | None:
        """The session's newest handoff that ``viewer`` can read (any, for the operator's ``private_too``)."""
        def accept(a: MemoryNode) -> bool:
            return a.type == "handoff" and (private_too or visible(a, viewer))

        return next(self._newest(tenant, session, accept), None)

    def _newest(self, tenant: str, session: str, accept: Callable[[MemoryNode], bool]) -> Iterator[MemoryNode]:
        """The session's memories that ``accept`` admits, newest first, read a page at a time."""
        before: Key | None = None
        while True:
            page = self.graph.page(tenant, session, before, PAGE)
            nodes = self.graph.memories(tenant, (k[1] for k in page))
            yield from (a for k in page if (a := nodes.get(k[1])) is not None and accept(a))
            if len(page) < PAGE:
                return
            before = page[-1]

    def create_handoff(self, tenant: str, session: str, agent: str, content: str,
                       fields: MemoryFields) -> AddResult:
        """A handoff memory (salience 0.95 unless given) linked by SUPERSEDES to the session's previous one.
        A ``type`` among ``fields`` (``add_memory(type="handoff")``'s) is replaced by ``handoff``."""
        tenant = v.tenant(tenant)
        item: AddItem = {**fields, "tenant": tenant, "session": session, "agent": agent, "content": content,
                         "type": "handoff"}
        # A shared handoff supersedes the latest shared one (never pointing at a private row); a
        # private one, the latest its author can read.
        chain_viewer = agent if fields.get("visibility") == "agent" and isinstance(agent, str) else None
        with self.writer.lock:  # the previous handoff cannot change under us
            prev = self.latest_handoff(tenant, str(session), chain_viewer) if isinstance(session, str) else None
            edges = [(mem_node(prev.id), SUPERSEDES)] if prev else []
            return self.writer.add_many([item], edges=[edges])[0]

    # ---- summaries -------------------------------------------------------------------------
    def summarize_session(self, tenant: str, session: str) -> Episode:
        """The session's miniSummary as an EPISODE; cached until the session gains memories."""
        tenant = v.tenant(tenant)
        session = str(v.name(session, "session"))
        # One episode per session, readable by every agent of the tenant: so it is built from
        # shared rows only. Private rows never enter its text, its covers or its count, and a
        # private write does not even invalidate it (its cache key is the newest shared row).
        with self.writer.lock:  # one consistent view of the session while the summary's input is read
            existing = self.graph.session_episode(tenant, session)
            newest = self._shared_keys(tenant, session, SUMMARY_WINDOW)
            if not newest:
                if existing:
                    return episode_from_attrs(existing, cached=True)
                raise NotFoundError(f"Session '{session}' has no memories to summarize.", session=session)
            last_key = newest[0]
            if (existing and existing.last_id == last_key[1] and existing.last_ts_us == last_key[0]
                    and (existing.first_id is None or self._shared(tenant, existing.first_id))):
                return episode_from_attrs(existing, cached=True)
            keys = newest
            rows = self.reader.rows(tenant, [k[1] for k in reversed(keys)], None)  # shared rows only
            handoff = self.latest_handoff(tenant, session, None)
            shared_count = self.graph.count(tenant, session) - self.graph.hidden_count(tenant, session, None)
        turns = summary_turns(rows)
        outcome = summarize_with_fallback(
            self.provider, self.provider_settings, turns, handoff_content(self.graph, tenant, handoff)
        )
        now_us = time.time_ns() // 1000
        # a model can echo what it read (a memory stored before the guard, or under "allow"): the summary
        # written back passes the secrets guard like every other write
        row = {
            "tenant": tenant, "session": session, "summary": self.writer.guard.summary(outcome.text),
            "summary_source": outcome.source,
            "summary_error": outcome.error, "first_id": keys[-1][1] if keys else None, "last_id": last_key[1],
            "turn_count": shared_count, "last_ts_us": last_key[0],
            "handoff_id": handoff.id if handoff else None,
            "created_us": existing.created_us if existing else now_us, "updated_us": now_us,
        }
        return episode_from_attrs(self._write_episode(row, existing))

    def _shared(self, tenant: str, mem_id: int) -> bool:
        """Whether the tenant's memory exists and is shared (``visibility="tenant"``)."""
        attrs = self.graph.memory(tenant, mem_id)
        return attrs is not None and visible(attrs, None)

    def _shared_keys(self, tenant: str, session: str, limit: int) -> list[Key]:
        """The session's newest ``limit`` shared keys, newest first."""
        out: list[Key] = []
        # current versions only: a summary never repeats what a correction replaced
        for a in self._newest(tenant, session, lambda a: visible(a, None) and a.valid_to_us is None):
            out.append(a.key)
            if len(out) >= limit:
                break
        return out

    def _write_episode(self, row: dict[str, Any], existing: EpisodeNode | None) -> EpisodeNode:
        """Journal → Chroma → graph, the write path's one sequence (:meth:`WritePath.staged`)."""
        taken = stamp(self.embedder)
        vector = self.embedder.embed([row["summary"]])[0]
        w = self.writer

        def begin(tx: GraphTxn) -> list[tuple[str, str, str]]:
            row["id"] = existing.id if existing else tx.allocate_ids(1)[0]
            return [("episode", row["tenant"], episode_ref(row["id"]))]

        def upsert() -> None:
            self.vectors.upsert(row["tenant"], [episode_ref(row["id"])], [vector], [row["summary"]],
                                [episode_vector_metadata(row)])

        def undo(_entries: list[tuple[str, str, str]]) -> None:
            if existing is None:  # a new episode's record goes; a refreshed one keeps its old record's ref
                w.recover()

        with w.lock:
            if not still_current(self.embedder, taken):  # a re-embed switched models meanwhile
                vector = self.embedder.embed([row["summary"]])[0]
            w.staged(begin, upsert, lambda tx: tx.write_episode(row), undo)
        written = self.graph.episode(row["tenant"], row["id"])
        assert written is not None  # just committed under the writer lock
        return written

    # ---- recovery --------------------------------------------------------------------------
    def recover_context(
        self, tenant: str, session: str, viewer: str | None, turns: int | None, budget_chars: int | None = None,
        store_summary: bool = True,
    ) -> Recovery:
        """Latest handoff (full), the session summary and the newest turns with a cursor.

        Turns stop at ``turns`` or when their previews (``recover.turn_preview_chars`` each)
        would pass ``budget_chars``; ``next_cursor`` then continues right after the last one.
        Without ``store_summary`` (a read-only caller) nothing is written and no model is called:
        the stored summary when it is current, else an extractive one made now and not stored.
        """
        rec = self.settings.recover
        turns = rec.turns if turns is None else turns
        budget = rec.turns_budget_chars if budget_chars is None else budget_chars
        tenant = v.tenant(tenant)
        session = str(v.name(session, "session"))
        episode = self._recovery_summary(tenant, session) if store_summary else self._unstored_summary(tenant, session)
        handoff_attrs = self.latest_handoff(tenant, session, viewer)
        handoff = self.reader.rows(tenant, [handoff_attrs.id], viewer)[0] if handoff_attrs else None
        page = self.reader.recent_turns(tenant, session, turns, None, viewer)
        kept: list[MemoryRow] = []
        used = 0
        for turn in page.turns:
            # a turn costs its preview plus the row's fields (ref, agent, timestamp, …) on the wire
            cost = min(turn.content_len, rec.turn_preview_chars or turn.content_len) + TURN_ROW_OVERHEAD_CHARS
            if kept and used + cost > budget:
                break
            kept.append(turn)
            used += cost
        if len(kept) < len(page.turns):
            page = RecentTurnsPage(kept, self.reader.turn_cursor(tenant, session, kept[-1]))
        return Recovery(handoff, episode, page)

    def _recovery_summary(self, tenant: str, session: str) -> Episode | None:
        """The session summary for recovery without ever waiting on a slow model for long.

        Extractive summaries (no provider) are instant. With a provider, a stale summary is
        refreshed on a background worker; recovery waits ``recover.summary_wait_s`` for it and
        otherwise returns the previous summary marked ``stale`` (or, for a session never
        summarized, an extractive one that says the model summary is pending).
        """
        try:
            if self.provider is None:
                return self.summarize_session(tenant, session)
            future = self._refresh(tenant, session)
            return future.result(timeout=self.settings.recover.summary_wait_s)
        except NotFoundError:
            return None
        except FutureTimeout:
            return self._while_refreshing(tenant, session)

    def _unstored_summary(self, tenant: str, session: str) -> Episode | None:
        """The session's stored summary if it is current, else an extractive one that is not stored."""
        existing = self.graph.session_episode(tenant, session)
        keys = self._shared_keys(tenant, session, SUMMARY_WINDOW)
        if not keys:
            return episode_from_attrs(existing, cached=True) if existing is not None else None
        if existing is not None and (existing.last_id, existing.last_ts_us) == (keys[0][1], keys[0][0]):
            return episode_from_attrs(existing, cached=True)
        return self._extractive(tenant, session, keys, SUMMARY_NOT_STORED)

    def _extractive(self, tenant: str, session: str, keys: list[Key], reason: str) -> Episode | None:
        """An extractive summary of the shared rows ``keys`` (newest first), made now, not stored."""
        rows = self.reader.rows(tenant, [k[1] for k in reversed(keys)], None)  # shared rows only
        handoff = handoff_content(self.graph, tenant, self.latest_handoff(tenant, session, None))
        if not rows:
            return None
        text = self.writer.guard.summary(extractive_summary(
            summary_turns(rows), handoff,
            self.provider_settings.max_summary_chars))
        return Episode(None, tenant, session, text, "fallback", reason, rows[0].ref, rows[-1].ref,
                       len(rows), rows[-1].timestamp)

    def _refresh(self, tenant: str, session: str) -> Future[Episode]:
        with self._refresh_lock:
            running = self._refreshing.get((tenant, session))
            if running is None or running.done():
                running = self._refresher.submit(self.summarize_session, tenant, session)
                self._refreshing[(tenant, session)] = running
            return running

    def _while_refreshing(self, tenant: str, session: str) -> Episode | None:
        existing = self.graph.session_episode(tenant, session)
        if existing is not None:
            return replace(episode_from_attrs(existing, cached=True), stale=True)
        return self._extractive(tenant, session, self._shared_keys(tenant, session, SUMMARY_WINDOW), SUMMARY_PENDING)


def summary_turns(rows: Sequence[MemoryRow]) -> list[SummaryTurn]:
    """What a session's summary is made of: its rows but handoffs (given apart) and the rows the poisoning scan
    flagged — a summary is read by every agent, injected by the harness's hooks and may be written by a model,
    so instructions aimed at a model never enter it (the rows themselves stay readable, marked)."""
    return [SummaryTurn.from_row(r) for r in rows if r.type != "handoff" and not r.flags]


def handoff_content(graph: MemoryRows, tenant: str, handoff: MemoryNode | None) -> str | None:
    """The text of the handoff a summary starts from; none for a handoff the poisoning scan flagged."""
    if handoff is None or handoff.flags:
        return None
    return graph.contents(tenant, [handoff.id]).get(handoff.id)

