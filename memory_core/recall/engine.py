"""Hybrid recall: branches find candidates, stages rank them, the result shows distinct facts.

One recall inside one tenant:

1. **reading** (:mod:`.query`): agents the query names (from the tenant's AGENT nodes), absolute
   and relative dates, the text to embed and the words to match; under ``type: "handoff"``, without
   the words every handoff says (:mod:`.asked`);
2. **branches** (:data:`BRANCHES`, :mod:`.branches`): each returns ranked lists of the same hit
   shape, with the filters pushed down so filtering happens before any top-N cut. Those that do not
   read the query's embedding (lexical: BM25 and keyword phrases; entities) run on the recall
   workers while the query is embedded; then the vector branch (Chroma, and the rows of a day the
   query names) runs on the calling thread;
3. **stages** (:data:`STAGES`), one after another over the one :class:`.Pool` of candidates: each
   row re-checked against its graph node (tenant, visibility, filters, ``exclude_contents``), fusion
   of the branches' lists, the graph signals (speaker, one entity hop, adjacent turns and their
   spread, chains, dates, session support, the author's previous turn), answer types, relevance,
   confidence (relevance, recency, salience), the quality gate (under ``type: "handoff"``: only the
   handoffs of what was asked, :mod:`.asked`), the cross-encoder (a preset's), the order: by
   confidence, or newest first under ``type: "handoff"`` (:mod:`.order`);
4. **result** (:mod:`.collapse`): copies of one fact become one row, the newest, carrying ``repeats``
   and the other refs, so ``limit`` counts distinct facts (off with ``collapse=False`` or ``deep``);
   the empty query's most recent rows and the gate's fallback collapse the same way.

A new branch is its module, its config group (:mod:`.presets`) and one line in :data:`BRANCHES`; a new
stage is one function of ``Pool`` and one line in :data:`STAGES`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from graph.api import GraphStore, Key, MemoryNode
from memory_core import validation as v
from memory_core.embedding.api import Embedder, embed_query
from memory_core.errors import InvalidInputError
from memory_core.models import MemoryRow, RecallResult, from_us
from memory_core.reads import Reader
from memory_core.recall import (
    answer_type,
    asked,
    dates,
    fusion,
    gate,
    neighbours,
    order,
    rerank,
    scoring,
    stale,
    superseded,
    turn_context,
)
from memory_core.recall.branches import entity, lexical, vector
from memory_core.recall.branches.api import Ask, Branch, Ranked
from memory_core.recall.collapse import Copy, collapse
from memory_core.recall.filters import UNSET, RecallFilters, resolve_project
from memory_core.recall.pool import Candidate, Pool, admit
from memory_core.recall.presets import RecallConfig, resolve_preset
from memory_core.recall.query import read_anchor, read_query
from memory_core.recall.request import RecallRequest
from memory_core.recall.stages import Stages, timed
from memory_core.refs import memory_ref
from memory_core.settings.schema import Settings
from memory_core.vectors.api import VectorStore
from memory_core.vectors.switch import pinned

MAX_QUERY_CHARS = 8_000
Scorer = Callable[[int], tuple[float, dict[str, Any]]]  # a ranked row's id -> (confidence, match_reason)
Stage = Callable[[Pool], None]

# the branches, in the order their lists join the pool (the order ties keep)
BRANCHES: tuple[Branch, ...] = (vector, lexical, entity)

STAGES: tuple[Stage, ...] = (
    lexical.cover,  # the best own-text rows have their words read
    admit,  # every row re-checked on its graph node and exclude_contents
    lexical.share,  # how much the lexical branch counts for this query
    fusion.fuse,  # the branches' lists into each row's base
    scoring.speaker,  # the row's author is an agent the query names
    entity.hop,  # rows sharing a rare entity with the best rows
    neighbours.join,  # the adjacent turns of the best rows
    superseded.link,  # the newer link of a chain
    neighbours.spread,  # a row lends to the turns beside it
    dates.lift,  # the dates the query names
    scoring.session,  # several turns of one conversation
    turn_context.lend,  # the author's previous turn
    answer_type.prefer,  # the kind of answer the question asks for; rows that ask
    superseded.penalise,  # older links below newer ones
    scoring.relevance,  # evidence and relevance
    scoring.weigh,  # confidence: relevance, recency, salience
    gate.gate,  # the quality gate (or its lexical fallback)
    asked.narrow,  # newest first: only the rows of what was asked
    rerank.reread,  # the cross-encoder (balanced-rerank)
    stale.step_aside,  # older facts a newer one contradicts: below it, marked
    order.order,  # by confidence, or newest first
)


class Recaller:
    """Runs recall for :class:`memory_core.service.MemoryCore`."""

    def __init__(self, graph: GraphStore, reader: Reader, vectors: VectorStore, embedder: Embedder,
                 settings: Settings) -> None:
        self.graph = graph
        self.reader = reader
        self.vectors = vectors
        self.embedder = embedder
        self.settings = settings
        self.branches: Sequence[Branch] = BRANCHES
        self.stages: Sequence[Stage] = STAGES
        self.reranker: rerank.PairScorer | None = None  # the balanced-rerank preset's model, on first use
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recall-lexical")

    def close(self) -> None:
        self._workers.shutdown(wait=True)

    def recall(self, request: RecallRequest) -> RecallResult:
        """Run one recall (see the module docstring for the pipeline), embedding and searching with one model
        and its index even when a re-embed switches them meanwhile (:mod:`memory_core.vectors.switch`)."""
        with pinned(self.embedder, self.vectors) as (embedder, vectors):
            return self._recall(request, embedder, vectors)

    def _recall(self, request: RecallRequest, embedder: Embedder, vectors: VectorStore) -> RecallResult:
        o = request.options
        query, limit, deep, context_text = request.query, o.get("limit"), o.get("deep", False), request.context_text
        held_context, viewer = request.held_context, o.get("viewer")
        started, stages = time.perf_counter(), Stages()
        collapsing = o.get("collapse", True) and not deep  # deep shows every copy
        tenant = v.tenant(request.tenant)
        if not isinstance(query, str):
            raise InvalidInputError("'query' must be a string (empty returns the most recent memories).")
        query = query.replace("\x00", " ")[:MAX_QUERY_CHARS]
        window = self.settings.recall.scan_window
        limit = self.settings.recall.default_limit if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= window:
            raise InvalidInputError(f"'limit' must be an integer from 1 to {window}.", field="limit")
        anchor = read_anchor(o.get("now"))
        cfg = resolve_preset(o.get("preset"), self.settings.recall, embedder.name)
        scope = resolve_project(o.get("project_id", UNSET), viewer, self.settings.operating_context.agents)
        filters = RecallFilters.build(
            tenant, viewer, scope, type=o.get("type"), session=o.get("session"), agent=o.get("agent"),
            channel=o.get("channel"), source_id=o.get("source_id"), exclude_contents=o.get("exclude_contents"),
            held_context=held_context, include_superseded=o.get("include_superseded", False) or deep,
            as_of=o.get("as_of"), include_stale=o.get("include_stale", False) or deep,
            include_quarantined=o.get("include_quarantined", False),
        )
        if anchor is None and filters.as_of_us is not None:
            anchor = from_us(filters.as_of_us)  # relative dates of an as_of recall count from that instant
        result = RecallResult([], resolved_project_id=scope.resolved_project_id,
                              operating_context_warning=scope.warning)
        if not query.strip() and not (context_text or "").strip():
            result.messages = self._most_recent(filters, limit, collapsing, result.diagnostics)
        else:
            if anchor is None and (bounds := self.graph.bounds(filters.tenant, None)):
                anchor = from_us(bounds[1][0])  # relative dates: against the newest memory
            # the name index is O(query), whatever the number of agents
            reading = (read_query(query, self.graph.agent_names(filters.tenant), anchor, cfg.query.name_pronouns)
                       if query.strip()
                       else read_query(context_text or "", (), anchor))
            if query.strip() and (lead := next((t for t in reversed(held_context) if t.strip()), "")):
                reading = replace(reading, lead=lead)
            telling = False
            if order.newest_first(filters, deep):  # judged without the words every row of the type says
                what = asked.without_common(self.graph, filters, reading, cfg.asked)
                reading, telling = what.reading, what.telling
                if what.common:
                    result.diagnostics["common_words"] = what.common
            ask = Ask(self.graph, vectors, filters, reading, cfg, limit, window, self._workers,
                      result.diagnostics)
            branches = [b for b in self.branches if b.wanted(cfg)]
            pool = Pool(self.graph, filters, reading, cfg, limit, deep=deep, collapsing=collapsing,
                        diagnostics=result.diagnostics, stages=stages, scorer=self._reranker, branches=branches,
                        vectors=vectors, embedder=embedder, telling=telling)
            pool.join(self._search(ask, branches, query if query.strip() else None, context_text, stages,
                                   embedder))
            for stage in self.stages:
                stage(pool)
            self._show(pool, result)
            stages.lap("rank")
            result.diagnostics["stages_ms"] = stages.as_dict()
        result.diagnostics["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return result

    def _search(self, ask: Ask, branches: Sequence[Branch], query: str | None, context_text: str | None,
                stages: Stages, embedder: Embedder) -> list[Ranked]:
        """Every branch's lists, in the branch list's order. The branches that need no embedding run on the
        workers while the query is embedded (SQLite and onnxruntime both release the GIL, so their cost
        hides behind the model's); the embedded ones then run here. Each is timed under its name."""
        beside: dict[str, Future[tuple[list[Ranked], float]]] = {
            b.NAME: self._workers.submit(timed(b.search), ask) for b in branches if not b.EMBEDDED}
        stages.lap("read")
        found: dict[str, list[Ranked]] = {}
        try:
            embedded = [b for b in branches if b.EMBEDDED]
            if embedded:
                cfg = ask.cfg
                text = (ask.reading.semantic if cfg.query.strip_names else query) if query else None
                ask = replace(ask, embedding=self._query_vector(embedder, text, context_text, cfg))
                stages.lap("embed")
            for b in embedded:
                found[b.NAME] = b.search(ask)
                stages.lap(b.NAME)
        finally:
            done = {name: future.result() for name, future in beside.items()}
        for name, (lists, ms) in done.items():
            found[name] = lists
            stages.add(name, ms)
        stages.lap("wait")
        return [ranked for b in branches for ranked in found[b.NAME]]

    def _reranker(self) -> rerank.PairScorer:
        self.reranker = self.reranker or rerank.shared_cross_encoder(self.settings.embedding.threads)
        return self.reranker

    def _show(self, pool: Pool, result: RecallResult) -> None:
        """The ranked rows (or the gate's fallback, unscored) as the caller sees them."""
        filters, attrs, limit = pool.filters, pool.attrs, pool.limit
        result.order = pool.order
        if pool.fallback is not None:
            weak = pool.fallback
            if pool.collapsing:
                result.messages = self._distinct_rows(filters, [attrs[c.id] for c in weak], limit,
                                                      result.diagnostics)
            else:
                result.messages = self.reader.rows_any(filters.tenant, [c.id for c in weak[:limit]], filters.viewer)
            result.gate_fallback = bool(result.messages)
            return
        top = pool.ranked
        refs = {k: memory_ref(k) for _conf, c in top
                for k in (c.neighbour_of, c.superseded_by, c.entity_via, c.stale.newer if c.stale else None)
                if k is not None}
        labels, rrf_k = pool.labels(), pool.cfg.fusion.rrf_k
        if pool.collapsing:
            by_id: dict[int, tuple[float, Candidate]] = {c.id: (conf, c) for conf, c in top}

            def score(mem_id: int) -> tuple[float, dict[str, Any]]:
                conf, c = by_id[mem_id]
                return conf, scoring.reason(conf, c, rrf_k, refs, labels)

            result.messages = _marked(self._distinct_rows(filters, [attrs[c.id] for _, c in top], limit,
                                                          result.diagnostics, score), by_id, refs)
            return
        rows = {r.id: r for r in self.reader.rows_any(filters.tenant, [c.id for _, c in top], filters.viewer)}
        result.messages = _marked([rows[c.id].scored(conf, scoring.reason(conf, c, rrf_k, refs, labels))
                                   for conf, c in top if c.id in rows], {c.id: (conf, c) for conf, c in top}, refs)

    # ---- empty query ---------------------------------------------------------------------
    def _most_recent(self, filters: RecallFilters, limit: int, collapsing: bool,
                     diagnostics: dict[str, Any]) -> list[Any]:
        g, tenant = self.graph, filters.tenant
        picked: list[MemoryNode] = []
        facts: set[str] = set()  # distinct content hashes picked (collapsing: limit counts these)
        before: Key | None = None
        window = self.settings.recall.scan_window
        while (len(facts) if collapsing else len(picked)) < limit:
            # pages of the time index, newest first, checked as they come
            page = g.page(tenant, filters.session, before, max(limit * 2, 32))
            nodes = g.memories(tenant, (k[1] for k in page))
            admitted = [a for k in page if (a := nodes.get(k[1])) is not None and filters.admits(a)]
            held = g.contents(tenant, [a.id for a in admitted]) if filters.excludes else {}
            for a in admitted:
                if not filters.excludes or not filters.excluded(held.get(a.id, "")):
                    picked.append(a)
                    facts.add(a.content_hash or f"#{a.id}")
            if len(page) < max(limit * 2, 32) or len(picked) >= window:  # collapsing reads at most the window
                break
            before = page[-1]
        if not collapsing:
            return self.reader.rows(tenant, [a.id for a in picked[:limit]], filters.viewer)
        return self._distinct_rows(filters, picked, limit, diagnostics)

    def _distinct_rows(self, filters: RecallFilters, ranked: Sequence[MemoryNode], limit: int,
                       diagnostics: dict[str, Any], score: Scorer | None = None) -> list[MemoryRow]:
        """The rows of the first ``limit`` distinct facts of ``ranked`` (best first): each the newest copy of
        its fact with ``repeats`` / ``also``, scored (``score``) as the fact's best-ranked copy."""
        tenant = filters.tenant
        groups = collapse([Copy(a.id, a.ts_us, a.content_hash) for a in ranked], limit,
                          lambda ids: self.graph.contents(tenant, ids))
        rows = {r.id: r for r in self.reader.rows_any(tenant, [grp.shown.id for grp in groups], filters.viewer)}
        out = []
        for grp in groups:
            row = rows.get(grp.shown.id)
            if row is None:
                continue
            if score is not None:
                row = row.scored(*score(grp.lead.id))
            out.append(row.with_repeats([memory_ref(i) for i in grp.also]) if len(grp.members) > 1 else row)
        diagnostics["collapsed"] = sum(len(grp.members) - 1 for grp in groups)
        return out

    def _query_vector(self, embedder: Embedder, query: str | None, context_text: str | None,
                      cfg: RecallConfig) -> list[float]:
        texts = [t for t in (query, context_text) if t and t.strip()]
        vecs = embed_query(embedder, texts)
        if len(vecs) == 1:
            return vecs[0]
        w = cfg.query.context_weight
        blended = [(1 - w) * a + w * b for a, b in zip(vecs[0], vecs[1], strict=True)]
        norm = math.sqrt(sum(x * x for x in blended)) or 1.0
        return [x / norm for x in blended]


def _marked(rows: list[MemoryRow], by_id: dict[int, tuple[float, Candidate]], refs: dict[int, str]) -> list[MemoryRow]:
    """The rows a newer one contradicts marked ``possibly_stale`` with its ref (:mod:`.stale`)."""
    out = []
    for row in rows:
        found = by_id.get(row.id)
        mark = found[1].stale if found is not None else None
        out.append(row.stale(refs[mark.newer]) if mark is not None and mark.newer in refs else row)
    return out
