"""Hybrid recall: vector + BM25 + keyword candidates, joined with the graph, fused, scored.

Pipeline for one query inside one tenant:

1. candidates: Chroma (cosine), the tenant's FTS5 table (BM25) and keyword phrases, each
   with the filters pushed down so filtering happens before any top-N cut;
2. join: every candidate is re-checked against its AGENT_MEMORY node (tenant, visibility,
   filters) and against ``exclude_contents``;
3. fusion: relative-score fusion (RSF) of the retrievers, with RRF kept for explanation;
4. graph signals: speakers named in the query, sessions dense with hits, and expansion to
   the turns adjacent to strong hits (at a discount);
5. confidence = relevance, recency (own timestamp) and salience mixed; the quality gate
   drops weak rows, falling back to lexical matches rather than returning nothing.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from graph.store import GraphStore
from memory_core import validation as v
from memory_core.config import Settings
from memory_core.embedding import Embedder
from memory_core.errors import InvalidInputError
from memory_core.models import RecallResult
from memory_core.reads import Reader, episode_attrs
from memory_core.recall.filters import UNSET, RecallFilters, resolve_project
from memory_core.recall.lexical import WORD, LexicalIndex, content_terms
from memory_core.recall.presets import RecallConfig, resolve_preset
from memory_core.refs import EPISODE, parse_ref
from memory_core.vector_store import VectorHit, VectorStore

DAY_US = 86_400 * 1_000_000
MAX_QUERY_CHARS = 8_000
MIN_RELEVANCE = 0.08
# cosine below the floor is treated as no similarity; floor + span as full similarity (MiniLM scale)
COSINE_FLOOR = 0.10
COSINE_SPAN = 0.60
NEIGHBOUR_SEED_MIN = 0.30


@dataclass
class Candidate:
    id: int
    episode: bool = False
    cosine: float | None = None
    bm25: float | None = None
    keyword: float | None = None
    ranks: dict[str, int] = field(default_factory=dict)
    graph: float = 0.0
    relevance: float = 0.0


def _relative(values: dict[int, float]) -> dict[int, float]:
    """Scores relative to the best in the pool (x / max, floored at 0).

    Unlike min-max scaling, a pool of four near-equal candidates stays near-equal
    instead of being stretched to 0..1.
    """
    if not values:
        return {}
    hi = max(values.values())
    if hi <= 1e-12:
        return dict.fromkeys(values, 1.0)
    return {k: max(0.0, x) / hi for k, x in values.items()}


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

    def recall(
        self, tenant: str, query: str, *, viewer: str | None = None, limit: int | None = None,
        type: str | None = None, session: str | None = None, agent: str | None = None,
        channel: str | None = None, source_id: str | None = None, project_id: Any = UNSET,
        exclude_contents: Sequence[str] | None = None, deep: bool = False, preset: str | None = None,
        context_text: str | None = None,
    ) -> RecallResult:
        started = time.perf_counter()
        tenant = v.tenant(tenant)
        if not isinstance(query, str):
            raise InvalidInputError("'query' must be a string (empty returns the most recent memories).")
        query = query.replace("\x00", " ")[:MAX_QUERY_CHARS]
        window = self.settings.recall.scan_window
        limit = self.settings.recall.default_limit if limit is None else limit
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= window:
            raise InvalidInputError(f"'limit' must be an integer from 1 to {window}.", field="limit")
        cfg = resolve_preset(preset, self.settings.recall)
        scope = resolve_project(project_id, viewer, self.settings.operating_context.agents)
        filters = RecallFilters.build(
            tenant, viewer, scope, type=type, session=session, agent=agent, channel=channel,
            source_id=source_id, exclude_contents=exclude_contents,
        )
        result = RecallResult([], resolved_project_id=scope.resolved_project_id,
                              operating_context_warning=scope.warning)
        if not query.strip() and not (context_text or "").strip():
            with self.graph.db.lock:
                result.messages = self._most_recent(filters, limit)
        else:
            # embedding and the Chroma query run outside the store lock; the graph join inside it
            pool = min(window, max(cfg.vector_pool, limit * 5))
            hits = []
            if cfg.w_vector > 0:
                qvec = self._query_vector(query, context_text, cfg)
                hits = self.vectors.query(filters.tenant, qvec, pool, filters.chroma_where())
            with self.graph.db.lock:
                self._ranked(result, filters, query, context_text, limit, cfg, deep, hits)
        result.diagnostics["elapsed_ms"] = round((time.perf_counter() - started) * 1000, 2)
        return result

    # ---- empty query ---------------------------------------------------------------------
    def _most_recent(self, filters: RecallFilters, limit: int) -> list[Any]:
        g = self.graph
        picked: list[int] = []
        index = g.all_index if filters.session else g.tenant_index
        session = filters.session or ""

        def accept(mem_id: int) -> bool:
            attrs = g.memory(filters.tenant, mem_id)
            return attrs is not None and filters.admits(attrs)

        for _ts, mem_id in index.newest_before(filters.tenant, session, None, accept):
            if filters.exclude:
                content = g.contents(filters.tenant, [mem_id]).get(mem_id, "")
                if filters.excluded(content):
                    continue
            picked.append(mem_id)
            if len(picked) >= limit:
                break
        return self.reader.rows(filters.tenant, picked, filters.viewer)

    # ---- ranked recall -------------------------------------------------------------------
    def _ranked(
        self, result: RecallResult, filters: RecallFilters, query: str, context_text: str | None,
        limit: int, cfg: RecallConfig, deep: bool, hits: list[VectorHit],
    ) -> None:
        window = self.settings.recall.scan_window
        cands: dict[int, Candidate] = {}
        for rank, hit in enumerate(hits):
            ref = parse_ref(hit.id)  # memories and episodes share one id space
            c = cands.setdefault(ref.id, Candidate(ref.id, episode=ref.kind == EPISODE))
            c.cosine, c.ranks["vector"] = 1.0 - hit.distance, rank
        lexical_query = query if query.strip() else (context_text or "")
        tenant_rows = self.graph.memory_count(filters.tenant)
        if cfg.w_lexical > 0:
            for rank, lhit in enumerate(self.lexical.bm25(filters, lexical_query, min(window, cfg.lexical_pool),
                                                                tenant_rows)):
                c = cands.setdefault(lhit.id, Candidate(lhit.id))
                c.bm25, c.ranks["bm25"] = lhit.score, rank
        if cfg.w_keyword > 0:
            for rank, khit in enumerate(self.lexical.keywords(filters, query, cfg.keyword_pool, tenant_rows)):
                c = cands.setdefault(khit.id, Candidate(khit.id))
                c.keyword, c.ranks["keyword"] = khit.score, rank
        attrs = self._admitted(filters, cands)
        contents = self._contents(filters.tenant, attrs)
        for mem_id in list(cands):
            if mem_id not in attrs or mem_id not in contents or filters.excluded(contents[mem_id]):
                del cands[mem_id]
        self._fuse(cands, contents, query, cfg)
        self._graph_signals(cands, attrs, filters, query, cfg, contents)
        scored = self._confidence(cands, attrs, filters, cfg, deep)
        gate = cfg.quality_gate
        kept = [(conf, c) for conf, c in scored if conf >= gate and c.relevance >= MIN_RELEVANCE]
        if not kept and scored:
            lexical = sorted(
                (c for c in cands.values() if c.bm25 is not None or c.keyword is not None),
                key=lambda c: (c.ranks.get("keyword", 10**6), c.ranks.get("bm25", 10**6)),
            )
            result.messages = self.reader.rows_any(filters.tenant, [c.id for c in lexical[:limit]], filters.viewer)
            result.gate_fallback = bool(result.messages)
            return
        kept.sort(key=lambda item: (-item[0], -attrs[item[1].id]["ts_us"]))
        rows = {r.id: r for r in self.reader.rows_any(filters.tenant, [c.id for _, c in kept[:limit]], filters.viewer)}
        result.messages = [
            rows[c.id].scored(conf, self._reason(conf, c)) for conf, c in kept[:limit] if c.id in rows
        ]
        result.diagnostics["candidates"] = len(cands)

    def _query_vector(self, query: str, context_text: str | None, cfg: RecallConfig) -> list[float]:
        texts = [t for t in (query, context_text) if t and t.strip()]
        vecs = self.embedder.embed(texts)
        if len(vecs) == 1:
            return vecs[0]
        w = cfg.context_weight
        blended = [(1 - w) * a + w * b for a, b in zip(vecs[0], vecs[1], strict=True)]
        norm = math.sqrt(sum(x * x for x in blended)) or 1.0
        return [x / norm for x in blended]

    def _admitted(self, filters: RecallFilters, cands: dict[int, Candidate]) -> dict[int, dict[str, Any]]:
        out = {}
        for item_id, c in cands.items():
            if c.episode:
                ep = self.graph.episode(filters.tenant, item_id)
                if ep is not None and filters.admits_episode(ep):
                    out[item_id] = episode_attrs(ep)
            else:
                a = self.graph.memory(filters.tenant, item_id)
                if a is not None and filters.admits(a):
                    out[item_id] = a
        return out

    def _contents(self, tenant: str, attrs: dict[int, dict[str, Any]]) -> dict[int, str]:
        out = self.graph.contents(tenant, [k for k, a in attrs.items() if a["kind"] != "EPISODE"])
        for k, a in attrs.items():
            if a["kind"] == "EPISODE" and (ep := self.graph.episode(tenant, k)) is not None:
                out[k] = ep["summary"]
        return out

    def _fuse(self, cands: dict[int, Candidate], contents: dict[int, str], query: str, cfg: RecallConfig) -> None:
        """RSF: per-retriever scores normalised and mixed by preset weights."""
        terms = [t[:5] for t in content_terms(query)]
        lex = _relative({k: c.bm25 for k, c in cands.items() if c.bm25 is not None})
        kw = _relative({k: c.keyword for k, c in cands.items() if c.keyword is not None})
        total = (cfg.w_vector + cfg.w_lexical + cfg.w_keyword) or 1.0
        for k, c in cands.items():
            v_score = 0.0
            if c.cosine is not None:  # absolute similarity, so a junk query scores low
                v_score = min(1.0, max(0.0, c.cosine - COSINE_FLOOR) / COSINE_SPAN)
            l_score = 0.0
            if c.bm25 is not None:
                words = {w[:5] for w in WORD.findall(contents[k].lower())}
                coverage = sum(1 for t in terms if t in words) / len(terms) if terms else 0.0
                l_score = lex[k] * (0.25 + 0.75 * coverage)  # relative BM25, anchored by query coverage
            k_score = (0.5 + 0.5 * kw[k]) if c.keyword is not None else 0.0
            c.relevance = (cfg.w_vector * v_score + cfg.w_lexical * l_score + cfg.w_keyword * k_score) / total

    def _graph_signals(
        self, cands: dict[int, Candidate], attrs: dict[int, dict[str, Any]], filters: RecallFilters,
        query: str, cfg: RecallConfig, contents: dict[int, str],
    ) -> None:
        """Speaker mentions, session density and adjacent-turn expansion, all from the graph."""
        if not cands:
            return
        words = {w.casefold() for w in WORD.findall(query)}
        named = {a for a in self.graph.agents(filters.tenant) if a.casefold() in words}
        if named and cfg.speaker_boost:
            for k, c in cands.items():
                if attrs[k]["agent"] in named:
                    c.graph += cfg.speaker_boost * c.relevance
        if cfg.session_boost:
            per_session: dict[str, list[float]] = {}
            for k, c in cands.items():
                per_session.setdefault(attrs[k]["session"], []).append(c.relevance)
            density = {s: sum(sorted(xs, reverse=True)[:3]) / 3 for s, xs in per_session.items()}
            top = max(density.values()) or 1.0
            for k, c in cands.items():
                c.graph += cfg.session_boost * density[attrs[k]["session"]] / top * c.relevance
        if cfg.neighbour_radius > 0:
            self._expand_neighbours(cands, attrs, filters, cfg, contents)
        for c in cands.values():
            c.relevance = min(1.0, c.relevance + c.graph)

    def _expand_neighbours(
        self, cands: dict[int, Candidate], attrs: dict[int, dict[str, Any]], filters: RecallFilters,
        cfg: RecallConfig, contents: dict[int, str],
    ) -> None:
        seeds = [c for c in sorted(cands.values(), key=lambda c: -c.relevance)[: cfg.neighbour_seeds]
                 if c.relevance >= NEIGHBOUR_SEED_MIN]
        added: dict[int, float] = {}
        for seed in seeds:
            a = attrs[seed.id]
            for _ts, nid in self.graph.all_index.window(filters.tenant, a["session"], (a["ts_us"], a["id"]),
                                                       cfg.neighbour_radius):
                added[nid] = max(added.get(nid, 0.0), cfg.neighbour_discount * seed.relevance)
        new_ids = [n for n in added if n not in cands]
        for nid in new_ids:
            na = self.graph.memory(filters.tenant, nid)
            if na is not None and filters.admits(na):
                attrs[nid] = na
        contents.update(self.graph.contents(filters.tenant, [n for n in new_ids if n in attrs]))
        for nid, score in added.items():
            if nid not in attrs or nid not in contents or filters.excluded(contents[nid]):
                continue
            c = cands.setdefault(nid, Candidate(nid))
            if score > c.relevance + c.graph:
                c.graph = score - c.relevance

    def _confidence(
        self, cands: dict[int, Candidate], attrs: dict[int, dict[str, Any]], filters: RecallFilters,
        cfg: RecallConfig, deep: bool,
    ) -> list[tuple[float, Candidate]]:
        if filters.type:
            w_r, tau = cfg.type_recency_weight, cfg.type_recency_half_life_days
        else:
            w_r, tau = cfg.recency_weight, cfg.recency_half_life_days
        if deep:
            w_r = 0.0
        w_s = cfg.salience_weight
        now_us = time.time_ns() // 1000
        out = []
        for k, c in cands.items():
            a = attrs[k]
            age_days = max(0.0, (now_us - a["ts_us"]) / DAY_US)
            recency = math.exp(-age_days / tau)  # e-folding time: new vs 7-day-old at w=0.5 → Δ≈0.316
            conf = (1.0 - w_r - w_s) * c.relevance + w_r * recency + w_s * a["salience"]
            out.append((conf, c))
        return out

    @staticmethod
    def _reason(conf: float, c: Candidate) -> dict[str, Any]:
        reason: dict[str, Any] = {"signal": "confidence", "score": round(conf, 4), "rsf": round(c.relevance, 4)}
        rrf = sum(1.0 / (60 + r + 1) for r in c.ranks.values())
        if rrf:
            reason["rrf"] = round(rrf, 5)
        if c.cosine is not None:
            reason["cosine"] = round(c.cosine, 4)
        if c.bm25 is not None:
            reason["bm25"] = round(c.bm25, 4)
        if c.keyword is not None:
            reason["keyword"] = round(c.keyword, 4)
        if c.graph:
            reason["graph"] = round(c.graph, 4)
        return reason
