"""MemoryCore: the one service API behind the MCP server, the CLI and library callers.

A facade by plain composition: each method validates what the boundary cannot, maps graph-store
failures to coded errors once, and hands the work to one service (writes to :class:`WritePath`,
recall to :class:`Recaller`, sessions to :class:`EpisodeService`, corrections to
:class:`VersionService`, entities to :class:`EntityService`). ``MemoryCore.open`` opens the parts
through the composition root, :func:`memory_core.open.open_parts`.

Its public surface is the agent-facing methods (and the operator's ``*_as_operator`` ones the CLI uses);
the services it holds are private. Operator code (doctor, stats, export and import, the inspector) takes
:meth:`MemoryCore.operator_parts` instead: the opened parts with this core's write path over them.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Unpack

from graph.api import EntityNode
from memory_core import validation as v
from memory_core.dir_lock import DirLock
from memory_core.entities.related import RelatedResult
from memory_core.entities.related import related as related_walk
from memory_core.entities.service import EntityService, MergedEntity
from memory_core.entities.worker import build_entity_worker
from memory_core.errors import InvalidInputError, LockedError
from memory_core.models import AddResult, CheckResult, Contents, MemoryRow, RecallResult, RecentTurnsPage
from memory_core.open import OpenOptions, Parts, is_replicated, open_parts
from memory_core.operator.parts import OperatorParts
from memory_core.reads import Reader, check_own, visible
from memory_core.recall.engine import Recaller
from memory_core.recall.filters import normalize
from memory_core.recall.presets import PRESETS
from memory_core.recall.request import RecallOptions, RecallRequest
from memory_core.recall.rerank import shared_cross_encoder
from memory_core.refs import MEMORY, CursorCodec, parse_ref
from memory_core.secret_guard import SecretGuard
from memory_core.sessions.episodes import Episode, EpisodeService, Recovery
from memory_core.settings.schema import Settings
from memory_core.store_errors import coded_graph_errors
from memory_core.vectors.lazy import LazyVectorStore
from memory_core.vectors.preload import newest_tenants, preload_indexes
from memory_core.vectors.switch import IndexSwitch
from memory_core.versions.service import EndResult, UpdateResult, VersionService
from memory_core.warm_up import warm_up_in_background
from memory_core.write.path import WritePath
from memory_core.write.request import (
    ADD_FIELD_NAMES,
    MEMORY_FIELD_NAMES,
    AddFields,
    AddItem,
    MemoryFields,
    refuse_unknown,
)

HANDOFF = "handoff"
REPLICA_CHECK_S = 2.0  # how often a replica's reads look whether another replica re-embedded the store


class MemoryCore:
    """Long-term memory for agents: AGENT_MEMORY nodes in a graph, records in Chroma."""

    def __init__(self, parts: Parts) -> None:
        """A store over opened parts (see :func:`memory_core.open.open_parts`); :meth:`open` is the usual way in."""
        settings, graph = parts.settings, parts.graph.graph
        # a re-embed run by the serving process switches both in place (memory_core.vectors.switch)
        self._switch = IndexSwitch(parts.embedder, parts.vectors)
        vectors, embedder = self._switch.vectors, self._switch.embedder
        if is_replicated(settings):  # another replica may re-embed the store: this one then stops using the old index
            self._switch.watch(lambda: (graph.meta("embedder"), graph.meta("vector_prefix")), REPLICA_CHECK_S)
        self._parts = parts
        self._graph = graph
        self._vectors = vectors
        self._embedder = embedder
        secret = graph.meta("cursor_secret") or ""
        self._reader = Reader(graph, CursorCodec(bytes.fromhex(secret)))
        self._writer = WritePath(graph, vectors, embedder, settings.limits, SecretGuard(settings.security.secrets),
                                 settings.write, settings.hygiene, settings.security.poisoning_for)
        self._recaller = Recaller(graph, self._reader, vectors, embedder, settings)
        self._versions = VersionService(graph, self._reader, self._writer)
        self._episodes = EpisodeService(graph, self._reader, self._writer, vectors, embedder, settings,
                                        parts.summary_provider)
        self._entity_service = EntityService(graph, self._writer.lock)
        self._entity_worker = build_entity_worker(settings.model_provider, graph, self._writer)
        self._recovered = tuple(self._writer.recover())
        self._operator_parts = OperatorParts(
            settings=settings, data_dir=parts.data_dir, graph=graph, maintenance=parts.graph.maintenance,
            vectors=vectors, embedder=embedder, writer=self._writer, reader=self._reader, episodes=self._episodes,
            versions=self._versions, recovered=self._recovered, switch=self._switch)
        self._closed = False

    @property
    def settings(self) -> Settings:
        """The settings the store was opened with."""
        return self._parts.settings

    @property
    def data_dir(self) -> Path:
        """The store's data directory (resolved)."""
        return self._parts.data_dir

    def operator_parts(self) -> OperatorParts:
        """The opened parts and this core's write path and reads over them: what doctor, stats, export and
        import and the inspector take (:mod:`memory_core.operator`), writing through the same lock as agents."""
        return self._operator_parts

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str] | None = None, **options: Unpack[OpenOptions]) -> MemoryCore:
        """Open (creating if needed) a store. ``settings`` default to config file + env.

        ``lock`` is the lock of ``data_dir`` when the caller claimed it already
        (:func:`memory_core.dir_lock.claim`); the store owns it from here (and releases it if the open fails).
        ``announcement`` names the file where a running server announces itself, so
        STORE_LOCKED can say which one holds the directory (see :class:`DirLock`).
        ``check_embedder_model=False`` opens a directory written with another embedding model
        (EMBEDDER_MISMATCH otherwise) for commands that read the graph only: export, tenants.
        """
        parts = open_parts(data_dir, **options)
        try:
            return cls(parts)
        except BaseException:
            parts.close()
            raise

    # ---- corrections and locks (the work is VersionService's) ----
    @coded_graph_errors("updating a memory")
    def update_memory(
        self, tenant: str, ref: str, *, content: str | None = None, metadata: Mapping[str, Any] | None = None,
        salience: float | None = None, agent: str | None = None, own_only: bool = False,
        valid_from: str | datetime | None = None,
    ) -> UpdateResult:
        """Correct a memory: a new version (new ref) that SUPERSEDES ``ref``, which is kept with its
        ``valid_to``: where the new one starts (``valid_from``, ISO-8601, when the change happened before it
        was recorded; default now). ``agent`` acts (and authors the new version; default the old author);
        another agent's private memory reads as missing. SUPERSEDED for an older version, LOCKED when locked;
        ``own_only`` (a write scope): SCOPE_DENIED unless ``agent`` wrote it."""
        return self._versions.update(tenant, ref, agent=agent, operator=False, content=content, metadata=metadata,
                                     salience=salience, own_only=own_only, valid_from=valid_from)

    @coded_graph_errors("updating a memory")
    def update_memory_as_operator(
        self, tenant: str, ref: str, *, content: str | None = None, metadata: Mapping[str, Any] | None = None,
        salience: float | None = None, agent: str | None = None, valid_from: str | datetime | None = None,
    ) -> UpdateResult:
        """The operator's update (CLI): any memory of the tenant, private or not."""
        return self._versions.update(tenant, ref, agent=agent, operator=True, content=content, metadata=metadata,
                                     salience=salience, valid_from=valid_from)

    @coded_graph_errors("ending a memory")
    def end_memory(self, tenant: str, ref: str, reason: str, *, agent: str | None = None,
                   own_only: bool = False) -> EndResult:
        """End a fact without a replacement (wrong, or no longer true): its validity ends now, with
        ``reason`` and ``agent`` kept; recall leaves it out (``as_of`` before the end still reads it),
        :meth:`revive_memory` undoes it. SUPERSEDED for a corrected version, LOCKED when locked;
        ``own_only`` (a write scope): SCOPE_DENIED unless ``agent`` wrote it."""
        return self._versions.end(tenant, ref, reason, agent=agent, operator=False, own_only=own_only)

    @coded_graph_errors("ending a memory")
    def end_memory_as_operator(self, tenant: str, ref: str, reason: str, *, agent: str | None = None) -> EndResult:
        """The operator's end (CLI): any memory of the tenant, private or not."""
        return self._versions.end(tenant, ref, reason, agent=agent, operator=True)

    @coded_graph_errors("reviving a memory")
    def revive_memory(self, tenant: str, ref: str, *, agent: str | None = None, own_only: bool = False) -> EndResult:
        """Undo :meth:`end_memory`: the fact is valid again (changed False when it was not ended)."""
        return self._versions.revive(tenant, ref, agent=agent, operator=False, own_only=own_only)

    @coded_graph_errors("reviving a memory")
    def revive_memory_as_operator(self, tenant: str, ref: str) -> EndResult:
        """The operator's revive (CLI): any memory of the tenant."""
        return self._versions.revive(tenant, ref, agent=None, operator=True)

    @coded_graph_errors("locking a memory")
    def lock_memory(self, tenant: str, ref: str, *, viewer: str | None = None, own_only: bool = False) -> bool:
        """Lock a memory against update and delete (LOCKED) until unlocked; False if it already was.
        ``own_only`` (a write scope): SCOPE_DENIED unless ``viewer`` wrote it."""
        return self._versions.set_lock(tenant, ref, True, agent=viewer, operator=False, own_only=own_only)

    @coded_graph_errors("unlocking a memory")
    def unlock_memory(self, tenant: str, ref: str, *, viewer: str | None = None, own_only: bool = False) -> bool:
        """Undo :meth:`lock_memory`; False if it was not locked. ``own_only`` as for lock_memory."""
        return self._versions.set_lock(tenant, ref, False, agent=viewer, operator=False, own_only=own_only)

    @coded_graph_errors("locking a memory")
    def set_lock_as_operator(self, tenant: str, ref: str, locked: bool) -> bool:
        """The operator's lock or unlock (CLI): any memory of the tenant."""
        return self._versions.set_lock(tenant, ref, locked, agent=None, operator=True)

    @coded_graph_errors("reading a memory's history")
    def history(self, tenant: str, ref: str, *, viewer: str | None = None) -> list[MemoryRow]:
        """Every version of ``ref``'s chain the viewer can read, oldest first."""
        return self._versions.history(tenant, ref, viewer=viewer, operator=False)

    @coded_graph_errors("reading a memory's history")
    def history_as_operator(self, tenant: str, ref: str) -> list[MemoryRow]:
        """The operator's history (CLI): private versions included."""
        return self._versions.history(tenant, ref, viewer=None, operator=True)

    # ---- entities (the work is EntityService's and the related walk's) ----
    @coded_graph_errors("reading entities")
    def list_entities(self, tenant: str, *, viewer: str | None = None, kind: str | None = None,
                      limit: int | None = None) -> list[EntityNode]:
        """The tenant's entities the viewer sees (names, kinds, aliases, mention counts), most mentioned first."""
        return self._entity_service.list(tenant, viewer, kind=kind, limit=limit)

    @coded_graph_errors("merging entities")
    def merge_entities(self, tenant: str, keep: str, merge: str, *, viewer: str | None = None) -> MergedEntity:
        """Fold entity ``merge`` (a ref or name) into ``keep``: aliases, mentions, relations move."""
        return self._entity_service.merge(tenant, keep, merge, viewer=viewer)

    @coded_graph_errors("walking the entity graph")
    def related(self, tenant: str, entity_or_ref: str, *, depth: int = 2, limit: int = 20,
                viewer: str | None = None, as_of: object = None) -> RelatedResult:
        """Memories and entities around an entity (name, alias or ``ent:`` ref) or a memory (``mem:``),
        best first, each with the path that connects it (depth ≤ 3 edges, limit ≤ 100). ``as_of`` (ISO-8601):
        only memories valid at that instant, and the relations they declared."""
        viewer = v.name(viewer, "viewer", required=False)
        return related_walk(self._graph, self._reader, tenant, entity_or_ref, depth=depth, limit=limit, viewer=viewer,
                            as_of_us=v.instant_us(as_of, "as_of"))

    @property
    def dir_lock(self) -> DirLock | None:
        """The data directory's lock this store holds (None for replicas, which hold none): ``/readyz`` checks it."""
        return self._parts.lock

    def warm_up_in_background(self) -> list[threading.Thread]:
        """Load the embedding model and open Chroma side by side on daemon threads (servers, right after
        start), then load the vector indexes the first recalls will need (:meth:`preload_indexes`)."""
        in_use = self._switch.current().vectors
        inner = getattr(in_use, "inner", in_use)

        def vectors() -> None:
            if isinstance(inner, LazyVectorStore):
                inner.open()
            self.preload_indexes()

        def reranker() -> None:  # the configured preset's second stage, if it has one
            preset = PRESETS.get(self.settings.recall.preset)
            if preset is not None and preset.rerank.top:
                shared_cross_encoder(self.settings.embedding.threads).score("warm", ["up"])

        return warm_up_in_background(self._embedder, vectors, reranker)

    def preload_indexes(self, tenants: Sequence[str] | None = None) -> list[str]:
        """Load the vector indexes of ``tenants`` (default: the server's bound tenant, else the
        ``storage.preload_tenants`` with the newest memories) within ``storage.vector_cache_mb``;
        returns the tenants loaded (see :mod:`memory_core.vectors.preload`)."""
        st = self.settings.storage
        if tenants is None:
            bound = self.settings.server.tenant
            tenants = ([bound] if bound else newest_tenants(self._graph, st.preload_tenants))[:st.preload_tenants]
        budget = st.vector_cache_mb << 20 if st.chroma == "embedded" else 0
        return preload_indexes(self._graph, self._vectors, tenants, self._embedder.dimension, budget,
                               self.settings.logs.tenant)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._entity_worker is not None:
            self._entity_worker.close()
        self._episodes.close()
        self._recaller.close()
        self._switch.current().vectors.close()
        self._parts.close()

    def __enter__(self) -> MemoryCore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writes ----------------------------------------------------------------------------
    @coded_graph_errors("writing a memory")
    def add_memory(self, tenant: str, session: str, agent: str, content: str, **fields: Unpack[AddFields]) -> AddResult:
        """Store one memory in Chroma and the graph; see :mod:`memory_core.write.path`. The fields, all
        optional, are :class:`memory_core.write.request.AddFields`; one it does not know is INVALID_INPUT.

        ``entities`` (``{name, kind?, aliases?}``, at most 32) and ``relations`` (``{from, to, label}``
        between them, at most 32) are linked in the same graph transaction, with what the
        deterministic extractor finds in the text (see :mod:`memory_core.entities.declared`).

        None (or left out) means "not given": type defaults to turn, salience by type, visibility to
        tenant, timestamp to now, source and metadata to ``{}``, project_id to the global pool.
        ``type="handoff"`` is exactly :meth:`create_handoff` (salience 0.95, SUPERSEDES the session's
        previous handoff), so every boundary writes the same graph for the same input;
        ``type="episode"`` is refused (episodes are written by :meth:`summarize_session`).
        """
        refuse_unknown(fields, ADD_FIELD_NAMES, "add_memory")
        if fields.get("type") == HANDOFF:
            return self._episodes.create_handoff(tenant, session, agent, content, fields)
        return self._writer.add_one({**fields, "tenant": tenant, "session": session, "agent": agent,
                                    "content": content})

    def write_batching(self) -> dict[str, float] | None:
        """How concurrent single adds were batched since the store opened (batches, rows, mean, largest,
        retried_alone, waited_s); None when batching is off (``write.batch_max = 1``)."""
        return None if self._writer.batches is None else self._writer.batches.stats()

    @coded_graph_errors("writing memories")
    def add_memories(self, items: Sequence[AddItem]) -> list[AddResult]:
        """Batch add (imports, benchmarks): validated up front, written all-or-nothing. Each item holds
        ``tenant``, ``session``, ``agent``, ``content`` and any of :meth:`add_memory`'s fields."""
        if not isinstance(items, Sequence) or not all(isinstance(i, dict) for i in items):
            raise InvalidInputError("add_memories takes a list of objects.")
        return self._writer.add_many(list(items), screen=True)

    @coded_graph_errors("deleting a memory")
    def delete_memory(self, tenant: str, ref: str, *, viewer: str | None = None, own_only: bool = False) -> bool:
        """Remove a memory from both stores, as ``viewer``; False when the viewer cannot read it.

        Another agent's private (``visibility="agent"``) memory reads as missing, exactly like
        another tenant's: it is not deleted and its existence is not revealed. ``own_only`` (a
        write-scoped connection) refuses, SCOPE_DENIED, a memory ``viewer`` did not write.
        """
        return self._delete(tenant, ref, v.name(viewer, "viewer", required=False), operator=False, own_only=own_only)

    @coded_graph_errors("deleting a memory")
    def delete_memory_as_operator(self, tenant: str, ref: str) -> bool:
        """The operator's delete (CLI): any memory of the tenant, private or not."""
        return self._delete(tenant, ref, None, operator=True, own_only=False)

    def _delete(self, tenant: str, ref: str, viewer: str | None, *, operator: bool, own_only: bool) -> bool:
        tenant = v.tenant(tenant)
        parsed = parse_ref(ref)
        if parsed.kind != MEMORY:
            return False
        with self._writer.lock:  # the row checked is the row deleted
            attrs = self._graph.memory(tenant, parsed.id)
            if attrs is None or not (operator or visible(attrs, viewer)):
                return False
            if own_only:
                check_own(attrs, viewer, "viewer")
            if attrs.locked:
                raise LockedError(f"{parsed} is locked; unlock it before deleting it.", ref=str(parsed))
            return self._writer.delete(tenant, parsed.id)

    # ---- reads -----------------------------------------------------------------------------
    @coded_graph_errors("reading recent turns")
    def query_recent_turns(
        self, tenant: str, session: str, limit: int = 20, cursor: str | None = None, *, viewer: str | None = None
    ) -> RecentTurnsPage:
        """A session's turns newest first, paged by an opaque cursor over (timestamp, id)."""
        tenant = v.tenant(tenant)
        session = v.name(session, "session")  # type: ignore[assignment]
        return self._reader.recent_turns(tenant, session, limit, cursor, viewer)

    @coded_graph_errors("reading memories")
    def get_contents(self, tenant: str, refs: Sequence[object], *, viewer: str | None = None,
                     as_of: object = None) -> Contents:
        """Full rows for refs; foreign, deleted or malformed refs are listed in ``missing``. ``as_of``
        (ISO-8601): each ref's version valid at that instant (missing when none was)."""
        tenant = v.tenant(tenant)
        if isinstance(refs, str) or not isinstance(refs, Sequence):
            raise InvalidInputError("'refs' must be a list of refs.", field="refs")
        if len(refs) > self.settings.recall.scan_window:
            raise InvalidInputError(f"At most {self.settings.recall.scan_window} refs per call.", field="refs")
        viewer = v.name(viewer, "viewer", required=False)
        return self._reader.get_contents(tenant, refs, viewer, self._versions.at(tenant, viewer, as_of))

    @coded_graph_errors("reading a memory")
    def check_memory(self, tenant: str, ref: str, *, viewer: str | None = None, as_of: object = None) -> CheckResult:
        """One memory with full content and its graph neighbours (author, session, adjacent), and
        its version chain (``neighbours["versions"]``, oldest first) when it has one. ``as_of``
        (ISO-8601): the version of its chain valid at that instant (NOT_FOUND when none was)."""
        return self._versions.check(v.tenant(tenant), ref, viewer, as_of)

    # ---- recall ----------------------------------------------------------------------------
    @coded_graph_errors("recalling")
    def recall(self, tenant: str, query: str, **options: Unpack[RecallOptions]) -> RecallResult:
        """Hybrid recall (vector + BM25 + keyword + graph); see :mod:`memory_core.recall.engine` and,
        for the options, :class:`memory_core.recall.request.RecallOptions`.

        limit ≤ scan window (None: ``recall.default_limit``); project_id omitted = all, '' = global
        pool, 'X' = X ∪ global, '@auto'; deep: no time decay. An empty query returns the most
        recent memories. Only the newest version of a corrected memory is returned (its row says
        ``supersedes``); ``include_superseded`` or ``deep`` add the older versions, marked ``valid_to``.
        ``as_of`` (ISO-8601): the memories valid at that instant instead (versions current then).
        A row a newer memory about the same things contradicts ranks below it, marked ``possibly_stale``
        with ``newer`` (``include_stale``: as it was; :mod:`memory_core.recall.stale`).
        Copies of one fact are one row, the newest, with ``repeats`` and the others' refs in ``also``
        (:mod:`memory_core.recall.collapse`), so ``limit`` counts distinct facts; ``collapse=False`` or
        ``deep`` return every copy.
        """
        with self._graph.consistent_reads(tenant):  # one version check per request on PostgreSQL
            return self._recaller.recall(RecallRequest(tenant, query, options))

    @coded_graph_errors("recalling")
    def recall_with_context(self, tenant: str, query: str, context: Sequence[Mapping[str, Any]],
                            **options: Unpack[RecallOptions]) -> RecallResult:
        """Recall sharpened by the recent conversation; never returns what the context already holds.
        Repeats collapse as in :meth:`recall`."""
        if isinstance(context, str) or not isinstance(context, Sequence):
            raise InvalidInputError("'context' must be a list of {role, content} objects.", field="context")
        texts: list[str] = []
        for entry in context:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("content"), str):
                raise InvalidInputError("Each context entry needs a string 'content'.", field="context")
            texts.append(entry["content"])
        recent = " ".join(texts[-4:])[-2000:]
        with self._graph.consistent_reads(tenant):
            return self._recaller.recall(RecallRequest(tenant, query, options, context_text=recent or None,
                                                       held_context=[t for t in texts if normalize(t)]))

    # ---- handoffs, summaries, recovery -----------------------------------------------------
    @coded_graph_errors("writing a handoff")
    def create_handoff(self, tenant: str, session: str, agent: str, content: str,
                       **fields: Unpack[MemoryFields]) -> AddResult:
        """A handoff (salience 0.95 unless given) that SUPERSEDES the session's previous handoff; the fields
        are :meth:`add_memory`'s but the type (:class:`memory_core.write.request.MemoryFields`)."""
        refuse_unknown(fields, MEMORY_FIELD_NAMES, "create_handoff")
        return self._episodes.create_handoff(tenant, session, agent, content, fields)

    @coded_graph_errors("summarizing a session")
    def summarize_session(self, tenant: str, session: str) -> Episode:
        """The session's miniSummary as an EPISODE (``ep:`` ref); model or extractive fallback."""
        return self._episodes.summarize_session(tenant, session)

    @coded_graph_errors("recovering a session")
    def recover_context(
        self, tenant: str, session: str, *, viewer: str | None = None, turns: int | None = None,
        budget_chars: int | None = None, store_summary: bool = True,
    ) -> Recovery:
        """After a compaction: latest handoff, session summary, newest turns and a cursor.

        ``store_summary=False`` (a read-only caller) writes nothing: a stale or missing summary is
        replaced by an extractive one that is not stored (``summary_error`` says so)."""
        return self._episodes.recover_context(tenant, session, viewer, turns, budget_chars, store_summary)
