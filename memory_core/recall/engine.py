"""Hybrid recall: vector + BM25 + keyword candidates, joined with the graph, fused, scored.

Pipeline for one query inside one tenant:

1. reading (:mod:`.query`): agents the query names (from the tenant's AGENT nodes), absolute
   dates, the text to embed and the words to match;
2. candidates: Chroma (cosine), the tenant's window FTS5 table (BM25 over a memory and the
   one before it; in tenants holding other kinds of memory also ranked by the memory's own
   text) and keyword phrases, each with the filters pushed down so filtering happens before
   any top-N cut; and the entity branch (:mod:`.entity_branch`): memories that mention the
   entities the query names;
3. join: every candidate is re-checked against its AGENT_MEMORY node (tenant, visibility,
   filters) and ``exclude_contents``; dialogue turns (type ``turn``) link to the adjacent
   turns of their session, which join the pool under the same checks; SUPERSEDES edges mark
   older links of a handoff chain; a version a newer one corrected (``update_memory``) is left
   out unless ``include_superseded`` or ``deep`` (then it ranks with the superseded penalty);
4. scoring (:mod:`.scoring`): relative-score fusion with the lexical weight adapted to how
   much of the query the lexical branch's best rows hold; speaker, dates; for dialogue turns
   only: window BM25, neighbour spread, session support and the vector similarity of the
   author's previous turn (:mod:`.turn_context`); superseded penalty; the entity
   branch's share, and one hop: the best rows lend to memories sharing a rare entity; a question
   asking when / how long / how many / where favours the best rows that hold such an answer, and
   a row that ends by asking a question holds none (:mod:`.answer_type`);
5. confidence = relevance, recency (own timestamp) and salience mixed; the quality gate
   asks whether the query matched at all (its best row) and falls back to lexical matches
   rather than return nothing; rows then need only a minimal relevance;
6. order: by confidence, except under ``type: "handoff"`` (not ``deep``), where the rows the
   gate kept come newest first (:func:`newest_first`; docs/recall-ordering.md).
7. repeats (:mod:`.collapse`): copies of one fact become one row, the newest, carrying
   ``repeats`` and the other refs, so ``limit`` counts distinct facts (off with ``collapse=False``
   or ``deep``); the empty query's most recent rows and the gate's fallback collapse the same way.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from graph.api import GraphStore, Key, LexicalHit, MemoryNode
from memory_core import validation as v
from memory_core.embedding.api import Embedder, embed_query
from memory_core.errors import InvalidInputError, StoreError
from memory_core.models import MemoryRow, RecallResult, from_us
from memory_core.reads import Reader, episode_attrs
from memory_core.recall import answer_type, rerank, scoring, turn_context
from memory_core.recall.branches import dated
from memory_core.recall.branches.entity import EntityBranch, EntityHits
from memory_core.recall.branches.lexical import WORD, LexicalIndex
from memory_core.recall.branches.vector import filtered_hits
from memory_core.recall.collapse import Copy, collapse
from memory_core.recall.filters import UNSET, RecallFilters, resolve_project
from memory_core.recall.presets import RecallConfig, resolve_preset
from memory_core.recall.query import QueryReading, read_anchor, read_query
from memory_core.recall.request import RecallRequest
from memory_core.recall.scoring import Candidate
from memory_core.recall.stages import Stages, timed
from memory_core.recall.turn_context import Around
from memory_core.refs import EPISODE, memory_ref, parse_ref
from memory_core.settings.schema import Settings
from memory_core.vectors.api import VectorHit, VectorStore

MAX_QUERY_CHARS = 8_000
COVERAGE_ROWS = 10
Scorer = Callable[[int], tuple[float, dict[str, Any]]]  # a ranked row's id -> (confidence, match_reason)


@dataclass
class Lexical:
    """The lexical worker's hits (window BM25, keyword phrases): read while the query is embedded."""

    bm25: list[LexicalHit] = field(default_factory=list)
    keywords: list[LexicalHit] = field(default_factory=list)


NEWEST_FIRST = "newest_first"
NEWEST_FIRST_TYPES = frozenset({"handoff"})


def newest_first(filters: RecallFilters, deep: bool) -> bool:
    """Whether the rows that pass the quality gate are ordered by time, not by confidence.

    Under ``type: "handoff"`` the newest handoff is the one a resuming agent needs, whatever
    its wording: relevance decides which handoffs are admitted, time their order. Other types
    keep the weighted recency (``type_recency_*``): a decision, note or error is one fact among
    many, and the newest one about something else must not outrank the one the query asks for
    (a decision that changed is corrected with ``update_memory``; recall then shows only its
    newest version). ``deep`` turns time off altogether, this rule included.
    """
    return not deep and filters.type in NEWEST_FIRST_TYPES


class Recaller:
    """Runs recall for :class:`memory_core.service.MemoryCore`."""

    def __init__(
        self, graph: GraphStore, reader: Reader, lexical: LexicalIndex, vectors: VectorStore,
        embedder: Embedder, settings: Settings,
    ) -> None:
        self.graph = graph
        self.reader = reader
        self.lexical = lexical
        self.vectors = vectors
        self.embedder = embedder
        self.settings = settings
        self.entities = EntityBranch(graph)
        self.reranker: rerank.PairScorer | None = None  # the balanced-rerank preset's model, on first use
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recall-lexical")

    def close(self) -> None:
        self._workers.shutdown(wait=True)

    def recall(self, request: RecallRequest) -> RecallResult:
        """Run one recall (see the module docstring for the pipeline)."""
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
        cfg = resolve_preset(o.get("preset"), self.settings.recall, self.embedder.name)
        scope = resolve_project(o.get("project_id", UNSET), viewer, self.settings.operating_context.agents)
        filters = RecallFilters.build(
            tenant, viewer, scope, type=o.get("type"), session=o.get("session"), agent=o.get("agent"),
            channel=o.get("channel"), source_id=o.get("source_id"), exclude_contents=o.get("exclude_contents"),
            held_context=held_context, include_superseded=o.get("include_superseded", False) or deep,
        )
        result = RecallResult([], resolved_project_id=scope.resolved_project_id,
                              operating_context_warning=scope.warning)
        if not query.strip() and not (context_text or "").strip():
            result.messages = self._most_recent(filters, limit, collapsing, result.diagnostics)
        else:
            if anchor is None and (bounds := self.graph.bounds(filters.tenant, None)):
                anchor = from_us(bounds[1][0])  # relative dates: against the newest memory
            # the name index is O(query), whatever the number of agents
            reading = (read_query(query, self.graph.agent_names(filters.tenant), anchor, cfg.name_pronouns)
                       if query.strip()
                       else read_query(context_text or "", (), anchor))
            if query.strip() and (lead := next((t for t in reversed(held_context) if t.strip()), "")):
                reading = replace(reading, lead=lead)
            # the pools (and the seeds below) do not grow with ``limit`` up to their size: min-max
            # scaling and neighbour joins over a wider pool would reorder the best rows
            pool = min(window, max(cfg.vector_pool, limit))
            # the lexical branch needs no embedding: it runs while the query is embedded
            # (SQLite and onnxruntime both release the GIL), hiding its cost behind the model's
            lexical = self._workers.submit(timed(self._lexical), filters, reading, cfg)
            named = self._workers.submit(timed(self.entities.find), filters, reading, cfg)
            stages.lap("read")
            hits: list[VectorHit] = []
            full = False
            try:
                if cfg.w_vector > 0 or cfg.fusion == "rrf":
                    text = (reading.semantic if cfg.strip_names else query) if query.strip() else None
                    qvec = self._query_vector(text, context_text, cfg)
                    stages.lap("embed")
                    on_day = dated.search(self._workers, self.graph, self.vectors, filters, reading, qvec, cfg)
                    try:
                        hits, path = filtered_hits(self.graph, self.vectors, filters, qvec, pool)
                        result.diagnostics["vector_path"] = path
                        full = len(hits) >= pool  # the dated rows below are not part of the pool's scale
                        hits += dated.joined(on_day, hits, result.diagnostics)
                    except StoreError as exc:  # a hung, down or failing Chroma: answer from the lexical side
                        result.diagnostics["vector_search"] = f"unavailable: {exc.message}"
            finally:
                stages.lap("vector")
                (found, lexical_ms), (entity_hits, entities_ms) = lexical.result(), named.result()
            stages.lap("wait")
            stages.add("lexical", lexical_ms)
            stages.add("entities", entities_ms)
            self._ranked(result, filters, reading, limit, cfg, deep, hits, full, found, entity_hits, stages,
                         collapsing)
            stages.lap("rank")
            result.diagnostics["stages_ms"] = stages.as_dict()
        result.diagnostics["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return result

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

    # ---- ranked recall -------------------------------------------------------------------
    def _ranked(
        self, result: RecallResult, filters: RecallFilters, reading: QueryReading, limit: int, cfg: RecallConfig,
        deep: bool, hits: list[VectorHit], vector_full: bool, lexical: Lexical, entity_hits: EntityHits,
        stages: Stages, collapsing: bool = True,
    ) -> None:
        cands = self._candidates(hits, lexical)
        EntityBranch.join(cands, entity_hits)
        attrs = self._admitted(filters, cands)
        # contents are read for exclude_contents (every row) or for the word coverage of the
        # best own-text BM25 rows (the query's quality is a maximum: weaker rows cannot set it)
        covered = {c.id for c in sorted((c for c in cands.values() if c.turn), key=lambda c: -(c.turn or 0.0))
                   [:COVERAGE_ROWS]}
        wanted = {k: a for k, a in attrs.items() if filters.excludes or k in covered}
        contents = self._contents(filters.tenant, wanted)
        for mem_id in list(cands):
            gone = mem_id not in attrs or (mem_id in wanted and mem_id not in contents)
            if gone or (filters.excludes and filters.excluded(contents[mem_id])):
                del cands[mem_id]
            else:
                cands[mem_id].dialogue = attrs[mem_id].type == "turn"
        # adaptive fusion: the lexical branch counts as much as its best rows cover the query's words
        row_words = {k: scoring.stems(contents[k], WORD) for k in covered if k in contents and k in cands}
        coverage = max((scoring.coverage(w, reading.terms) for w in row_words.values()), default=0.0)
        share = scoring.lexical_share(coverage, cfg)
        result.diagnostics["lexical_share"] = round(share, 3)
        scoring.base_scores(cands, cfg, vector_full, reading.named, {k: attrs[k].agent for k in cands},
                            lexical_share=share, as_name=reading.as_name)
        EntityBranch.score(cands, cfg)
        result.diagnostics["entity_hop_joined"] = self.entities.join_hops(cands, attrs, filters, cfg)
        around: Around = {}
        if cfg.spread_prev or cfg.spread_next:
            n_seeds = max(cfg.neighbour_seeds, limit)
            seeds = {c.id for c in sorted(cands.values(), key=lambda c: -c.base)[:n_seeds]}
            around = self._join_neighbours(cands, seeds, attrs, filters)
        if cfg.superseded_penalty:
            successors = self._successors(filters, [c.id for c in cands.values() if not c.episode])
            for mem_id, newer in successors.items():
                cands[mem_id].superseded_by = newer
        scoring.graph_scores(cands, cfg, reading, {k: attrs[k].ts_us for k in cands},
                             {k: attrs[k].session for k in cands})
        result.diagnostics["context_lent"] = turn_context.lend(self.graph, filters, cands, attrs, around,
                                                               cfg.w_context, cfg.context_sources)
        kind = answer_type.asked_kind(reading.text) if cfg.w_answer else None
        if kind is not None or cfg.asking_penalty:
            leaders = sorted(cands.values(), key=lambda c: -c.rel)[:cfg.answer_rows]
            unread = {c.id: attrs[c.id] for c in leaders if c.id not in contents}
            texts = {**contents, **self._contents(filters.tenant, unread)}
            if kind is not None:
                answer_type.lift(leaders, texts, kind, cfg.w_answer)
            answer_type.asking(leaders, texts, cfg.asking_penalty)
        scoring.supersede(cands, cfg, strict=bool(filters.type))
        for k, c in cands.items():
            words = row_words.get(k)
            c.evidence = scoring.evidence(c, words, reading)
        quality = scoring.relevance(cands)
        result.diagnostics.update(candidates=len(cands), quality=round(quality, 4))
        scored = scoring.confidences(cands, attrs, cfg, typed=bool(filters.type), deep=deep)
        # the quality gate asks whether the query matched at all (its best row); each row then passes
        # on its own confidence, its own absolute evidence (a close cosine, most of the query's words),
        # or on relevance alone: the best row's strength must not push out rows that match well themselves
        best = max((conf for conf, c in scored if c.relevance >= cfg.min_relevance), default=0.0)
        row_gate = cfg.quality_gate if cfg.row_gate is None else cfg.row_gate
        kept = [] if best < cfg.quality_gate else [
            (conf, c) for conf, c in scored if c.relevance >= cfg.min_relevance
            and (conf >= row_gate or c.evidence >= cfg.evidence_gate)]
        if not kept and scored:
            weak = [c for _conf, c in sorted(scored, key=lambda item: -item[0]) if c.turn or c.keyword]
            if newest_first(filters, deep):
                result.order = NEWEST_FIRST
                weak.sort(key=lambda c: (-attrs[c.id].ts_us, c.id))
            if collapsing:
                result.messages = self._distinct_rows(filters, [attrs[c.id] for c in weak], limit,
                                                      result.diagnostics)
            else:
                result.messages = self.reader.rows_any(filters.tenant, [c.id for c in weak[:limit]], filters.viewer)
            result.gate_fallback = bool(result.messages)
            return
        if cfg.rerank_top:
            stages.lap("rank")
            self.reranker = self.reranker or rerank.shared_cross_encoder(self.settings.embedding.threads)
            kept, result.diagnostics["reranked"] = rerank.apply(
                self.graph, filters, kept, attrs, lambda rows: self._contents(filters.tenant, rows),
                rerank.model_query(reading.text, reading.lead),
                cfg.rerank_top, cfg.rerank_weight, self.reranker)
            stages.lap("rerank")
        if newest_first(filters, deep):  # relevance admitted them; time orders them
            result.order = NEWEST_FIRST

            def rank(item: tuple[float, Candidate]) -> tuple[float, ...]:
                return -attrs[item[1].id].ts_us, -item[0], item[1].id
        else:

            def rank(item: tuple[float, Candidate]) -> tuple[float, ...]:
                return -item[0], -(item[1].cosine or 0.0), -attrs[item[1].id].ts_us, item[1].id

        # collapsing ranks every kept row: a fact's copies below the cut are still its repeats
        top = sorted(kept, key=rank) if collapsing else heapq.nsmallest(limit, kept, key=rank)
        refs = {k: memory_ref(k) for _conf, c in top for k in (c.neighbour_of, c.superseded_by, c.entity_via)
                if k is not None}
        if collapsing:
            by_id = {c.id: (conf, c) for conf, c in top}

            def score(mem_id: int) -> tuple[float, dict[str, Any]]:
                conf, c = by_id[mem_id]
                return conf, scoring.reason(conf, c, cfg.rrf_k, refs)

            result.messages = self._distinct_rows(filters, [attrs[c.id] for _, c in top], limit,
                                                  result.diagnostics, score)
            return
        rows = {r.id: r for r in self.reader.rows_any(filters.tenant, [c.id for _, c in top], filters.viewer)}
        result.messages = [rows[c.id].scored(conf, scoring.reason(conf, c, cfg.rrf_k, refs))
                           for conf, c in top if c.id in rows]

    def _lexical(self, filters: RecallFilters, reading: QueryReading, cfg: RecallConfig) -> Lexical:
        """Window BM25 and keyword hits, each with the filters inside its SQL."""
        window = self.settings.recall.scan_window
        bm25: list[LexicalHit] = []
        keywords: list[LexicalHit] = []
        if cfg.w_window > 0 or cfg.w_turn > 0:
            pool = min(window, cfg.lexical_pool)
            # rows that are not dialogue turns key on their own text: their best may sit outside the window's pool
            if self.graph.non_turn_count(filters.tenant):
                bm25, own = self.lexical.windows(filters, reading.terms, pool)
                seen = {h.id for h in bm25}
                bm25 += [h for h in own if h.id not in seen]
            else:
                bm25 = self.lexical.window(filters, reading.terms, pool)
        if cfg.w_keyword > 0:
            keywords = self.lexical.keywords(filters, reading.text, cfg.keyword_pool)
        # their nodes are read here, while the query is still being embedded: the join then finds them in
        # the store's node cache (each read re-checks the tenant). Their session neighbours are not: only
        # a few of them turn out to be needed (see _join_neighbours), and on 2 cores this worker's CPU
        # slows the embedding beside it (reading them all here cost recall 0.85 ms at 100k)
        self.graph.memories(filters.tenant, {h.id for h in (*bm25, *keywords)})
        return Lexical(bm25, keywords)

    @staticmethod
    def _candidates(hits: list[VectorHit], lexical: Lexical) -> dict[int, Candidate]:
        """The retrievers' pools (each already filtered inside its own query), by id."""
        cands: dict[int, Candidate] = {}
        for rank, hit in enumerate(hits):
            ref = parse_ref(hit.id)  # memories and episodes share one id space
            c = cands.setdefault(ref.id, Candidate(ref.id, episode=ref.kind == EPISODE))
            c.cosine, c.ranks["vector"] = 1.0 - hit.distance, rank
        bm25, keywords = lexical.bm25, lexical.keywords
        for rank, lhit in enumerate(bm25):
            c = cands.setdefault(lhit.id, Candidate(lhit.id))
            c.window, c.turn, c.ranks["bm25"] = lhit.score, lhit.turn, rank
        for rank, khit in enumerate(keywords):
            c = cands.setdefault(khit.id, Candidate(khit.id))
            c.keyword, c.ranks["keyword"] = khit.score, rank
        return cands

    def _join_neighbours(self, cands: dict[int, Candidate], seeds: set[int], attrs: dict[int, MemoryNode],
                         filters: RecallFilters) -> Around:
        """Link each pool row to the memories right before and after it in its session; those
        of ``seeds`` join the pool when absent (base 0: they only receive the spread), under
        the same filter checks. Returns the adjacency it read."""
        g, tenant = self.graph, filters.tenant
        dialogue = [attrs[c.id] for c in cands.values() if not c.episode and c.dialogue]
        # adjacency means "reply to" only between dialogue turns. A row links to a pool row only when that
        # row is right beside it in its session, so only rows sharing their session with another dialogue
        # row of the pool are read, and the seeds (their absent neighbours join): at 100k memories in sessions
        # of 200, 1.6 ms less a recall than reading every dialogue row's
        in_session = Counter(a.session for a in dialogue)
        read = g.adjacent_many(tenant, [a for a in dialogue if a.id in seeds or in_session[a.session] > 1])
        around = {i: read[i] for i in sorted(read)}
        fresh = {k[1] for c_id, pair in around.items() if c_id in seeds for k in pair
                 if k is not None and k[1] not in cands and k[1] not in attrs}
        fresh_nodes = g.memories(tenant, fresh)
        joined: dict[int, int] = {}
        for c_id, pair in around.items():
            c = cands[c_id]
            for key, side in zip(pair, ("prev", "next"), strict=True):
                if key is None:
                    continue
                nid = key[1]
                if nid not in cands:
                    if c.id not in seeds or nid in attrs:  # not a seed, or already refused/excluded
                        continue
                    na = fresh_nodes.get(nid)
                    if na is None or not filters.admits(na) or na.type != "turn":
                        continue
                    attrs[nid] = na
                    joined[nid] = c.id
                elif not cands[nid].dialogue:
                    continue
                setattr(c, side, nid)
        if filters.excludes and joined:
            held = g.contents(tenant, list(joined))
            for nid in list(joined):
                if nid not in held or filters.excluded(held[nid]):
                    del joined[nid]
        for nid, seed in joined.items():
            cands[nid] = Candidate(nid, neighbour_of=seed, dialogue=True)
        for c in cands.values():  # links to rows that did not join are dropped
            c.prev = c.prev if c.prev in cands else None
            c.next = c.next if c.next in cands else None
        return around

    def _successors(self, filters: RecallFilters, ids: list[int]) -> dict[int, int]:
        """For each memory, the newest visible memory that SUPERSEDES it (an older handoff of the chain)."""
        newer = self.graph.superseders(filters.tenant, ids)
        if not newer:
            return {}
        nodes = self.graph.memories(filters.tenant, {i for srcs in newer.values() for i in srcs})
        out: dict[int, int] = {}
        for mem_id, srcs in newer.items():
            seen = [a for a in (nodes.get(i) for i in srcs)
                    if a is not None and (a.visibility != "agent" or a.agent == filters.viewer)]
            if seen:
                out[mem_id] = max(seen, key=lambda a: a.key).id
        return out

    def _query_vector(self, query: str | None, context_text: str | None, cfg: RecallConfig) -> list[float]:
        texts = [t for t in (query, context_text) if t and t.strip()]
        vecs = embed_query(self.embedder, texts)
        if len(vecs) == 1:
            return vecs[0]
        w = cfg.context_weight
        blended = [(1 - w) * a + w * b for a, b in zip(vecs[0], vecs[1], strict=True)]
        norm = math.sqrt(sum(x * x for x in blended)) or 1.0
        return [x / norm for x in blended]

    def _admitted(self, filters: RecallFilters, cands: dict[int, Candidate]) -> dict[int, MemoryNode]:
        out: dict[int, MemoryNode] = {}
        nodes = self.graph.memories(filters.tenant, [k for k, c in cands.items() if not c.episode])
        for item_id, c in cands.items():
            if c.episode:
                ep = self.graph.episode(filters.tenant, item_id)
                if ep is not None and filters.admits_episode(ep, self.graph.session_has_channel):
                    out[item_id] = episode_attrs(ep)
            elif (a := nodes.get(item_id)) is not None and filters.admits(a):
                out[item_id] = a
        return out

    def _contents(self, tenant: str, attrs: dict[int, MemoryNode]) -> dict[int, str]:
        out = self.graph.contents(tenant, [k for k, a in attrs.items() if a.kind != "EPISODE"])
        for k, a in attrs.items():
            if a.kind == "EPISODE" and (ep := self.graph.episode(tenant, k)) is not None:
                out[k] = ep.summary
        return out
