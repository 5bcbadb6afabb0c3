"""Scoring one recall's candidates: pure arithmetic over what the retrievers and the graph found.

For each candidate row ``i`` (weights from :class:`RecallConfig`)::

    base_i   = w_vector·v_i + a·(w_window·w_i + w_turn·t_i) + w_keyword·k_i + w_speaker·[author named]
               (a non-turn row uses (w_window + w_turn)·t_i: its predecessor is unrelated text;
                a = clamp(best rows' share of the query's words / adaptive_full, adaptive_min, 1))
    spread_i = base_i + spread_prev·base_next(i) + spread_next·base_prev(i)
    s_i      = spread_i + w_time·τ_i + w_time_relative·ρ_i·base_i/max base   (dates in the query)
    rel_i    = s_i + w_session·sess(session_i) / max sess    (turns; sess = mean of its best 3 s)

``v`` is the cosine min-max scaled over the vector pool, ``w``/``t``/``k`` the window BM25,
own-text BM25 and keyword scores over their best; adjacent memories of a pool row join the
pool with base 0 (they only receive the spread). With ``fusion="rrf"`` the retriever part
of ``base`` is Σ 1/(rrf_k + rank) instead, scaled to the best.

Relevance in 0..1 is ``quality · rel_i / max rel``: the ranking inside the query times how
well the query matched at all (``quality`` = the best absolute evidence in the pool:
cosine on the embedder's scale, share of the query's words a row holds, an exact keyword).
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memory_core.models import from_us
from memory_core.recall.dates import date_score
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import QueryReading

if TYPE_CHECKING:
    from graph.api import MemoryNode

DAY_US = 86_400 * 1_000_000
# cosine below the floor is treated as no similarity; floor + span as full similarity (MiniLM scale)
COSINE_FLOOR = 0.10
COSINE_SPAN = 0.60
STEM = 5  # query words and row words compare on their first letters (a cheap stemmer)


@dataclass(slots=True)
class Candidate:
    id: int
    episode: bool = False
    dialogue: bool = False  # a dialogue turn: window BM25, adjacency and session support apply
    cosine: float | None = None  # raw cosine of the embedded query
    vec: float = 0.0  # the cosine min-max scaled over the vector pool (what w_vector multiplies; rsf fusion)
    window: float | None = None  # raw BM25 over (text, previous text)
    turn: float | None = None  # raw BM25 over the text alone (0: only the previous text matched)
    keyword: float | None = None  # raw BM25 of an exact phrase
    ranks: dict[str, int] = field(default_factory=dict)
    prev: int | None = None  # adjacent admitted memories of the session
    next: int | None = None
    neighbour_of: int | None = None  # joined the pool only as an adjacent memory of this one
    speaker: str | None = None
    superseded_by: int | None = None
    entity_raw: float = 0.0  # mean weight² of the query's entities the row mentions (entity branch)
    entity: float = 0.0  # what the entity branch added to base (query entities and one hop)
    entities: tuple[str, ...] = ()  # the entities that carried it
    entity_via: int | None = None  # the pool row it shares a rare entity with (one hop)
    base: float = 0.0
    graph: float = 0.0  # what the graph signals added (speaker, spread, time, session)
    time: float = 0.0
    rel: float = 0.0
    evidence: float = 0.0  # absolute match evidence, 0..1
    relevance: float = 0.0  # 0..1
    rerank: float | None = None  # the second stage's probability (balanced-rerank preset), 0..1


def vector_scale(cosines: list[float], full: bool) -> tuple[float, float]:
    """(lo, span) for min-max over the vector pool. When the pool holds the whole (filtered)
    tenant, its worst row is not a reference point, so ``lo`` drops to the cosine floor."""
    if not cosines:
        return 0.0, 1.0
    lo, hi = min(cosines), max(cosines)
    if not full:
        lo = min(lo, COSINE_FLOOR)
    return lo, max(hi - lo, 1e-9)


def _best(values: list[float]) -> float:
    return max((x for x in values if x > 0), default=1.0)


def coverage(content_words: set[str], terms: list[str]) -> float:
    """Share of the query's words (stem-compared) a row's text holds."""
    return sum(1 for t in terms if t[:STEM] in content_words) / len(terms) if terms else 0.0


def lexical_share(best_coverage: float, cfg: RecallConfig) -> float:
    """How much the lexical branch counts for this query (1 = its full weights): a branch whose
    best rows hold few of the query's words is mostly matching chance words."""
    if not cfg.adaptive_full:
        return 1.0
    return min(1.0, max(cfg.adaptive_min, best_coverage / cfg.adaptive_full))


def base_scores(cands: dict[int, Candidate], cfg: RecallConfig, vector_full: bool, named: frozenset[str],
                authors: dict[int, str], lexical_share: float = 1.0, as_name: frozenset[str] | None = None) -> None:
    """Retriever evidence and the speaker signal, per candidate."""
    if cfg.fusion == "rrf":
        for c in cands.values():
            c.base = sum(1.0 / (cfg.rrf_k + r + 1) for r in c.ranks.values())
        top = _best([c.base for c in cands.values()])
        for c in cands.values():
            c.base /= top
    else:
        lo, span = vector_scale([c.cosine for c in cands.values() if c.cosine is not None], vector_full)
        w_top = _best([c.window or 0.0 for c in cands.values()])
        t_top = _best([c.turn or 0.0 for c in cands.values()])
        k_top = _best([c.keyword or 0.0 for c in cands.values()])
        own = cfg.w_window + cfg.w_turn if cfg.w_own is None else cfg.w_own
        for c in cands.values():
            v = c.vec = max(0.0, (c.cosine - lo) / span) if c.cosine is not None else 0.0
            if c.dialogue:
                lex = cfg.w_window * max(0.0, c.window or 0.0) / w_top + cfg.w_turn * (c.turn or 0.0) / t_top
            else:  # a note, decision or event is matched on its own text: its predecessor is unrelated
                lex = own * (c.turn or 0.0) / t_top
            c.base = cfg.w_vector * v + lexical_share * lex + cfg.w_keyword * max(0.0, c.keyword or 0.0) / k_top
    if named and cfg.w_speaker:
        top = _best([c.base for c in cands.values()])
        for k, c in cands.items():
            if c.neighbour_of is None and authors.get(k) in named:  # joined neighbours only get the spread
                c.speaker = authors[k]
                bonus = cfg.w_speaker * (max(0.0, c.base) / top if cfg.speaker_scaled else 1.0)
                if as_name is not None and authors[k] not in as_name:  # "the user", "the reviewer"
                    bonus *= cfg.plain_name_share
                c.base += bonus
                c.graph += bonus


def graph_scores(cands: dict[int, Candidate], cfg: RecallConfig, reading: QueryReading,
                 times: dict[int, int], sessions: dict[int, str]) -> None:
    """Neighbour spread, dates and session support; sets ``rel``."""
    spread = {k: 0.0 for k in cands}
    for c in cands.values():
        if c.prev is not None and c.prev in spread:
            spread[c.prev] += cfg.spread_prev * c.base
        if c.next is not None and c.next in spread:
            spread[c.next] += cfg.spread_next * c.base
    for k, c in cands.items():
        c.rel = c.base + spread[k]
        c.graph += spread[k]
    absolute = [w for w in reading.dates if not w.relative]
    relative = [w for w in reading.dates if w.relative]
    if reading.dates and cfg.w_time:
        top = _best([c.base for c in cands.values()])
        for k, c in cands.items():
            ts = from_us(times[k])
            t_abs = date_score(ts, absolute, cfg.time_grace_days, cfg.time_tau_days) if absolute else 0.0
            # a relative date counts from a guessed "now": it reorders relevant rows, never lifts unrelated ones
            t_rel = date_score(ts, relative, cfg.time_grace_days, cfg.time_tau_days) if relative else 0.0
            bonus = cfg.w_time * t_abs + cfg.w_time_relative * t_rel * max(0.0, c.base) / top
            c.time = max(t_abs, t_rel)
            c.rel += bonus
            c.graph += bonus
    if cfg.w_session and cands:
        by_session: dict[str, list[float]] = {}
        for k, c in cands.items():
            if c.dialogue:  # session support: several turns of one conversation about the query
                by_session.setdefault(sessions[k], []).append(c.rel)
        support = {s: sum(sorted(xs, reverse=True)[: cfg.session_top]) / min(len(xs), cfg.session_top)
                   for s, xs in by_session.items()}
        top = _best(list(support.values()))
        base_top = _best([c.base for c in cands.values()])
        for k, c in cands.items():
            if not c.dialogue:
                continue
            bonus = cfg.w_session * max(0.0, support[sessions[k]]) / top
            if cfg.session_scaled:  # reorders turns by their conversation, never lifts them over other rows
                bonus *= max(0.0, c.base) / base_top
            c.rel += bonus
            c.graph += bonus


def supersede(cands: dict[int, Candidate], cfg: RecallConfig, strict: bool) -> None:
    """An older link of a chain loses ``superseded_penalty``; with ``strict`` (the caller asked
    for one type: the current one is wanted) the current link inherits the best relevance of
    the links it supersedes, and each older link stays below its successor."""
    if not cfg.superseded_penalty:
        return
    keep = 1.0 - cfg.superseded_penalty
    for c in cands.values():
        if c.superseded_by is not None:
            c.rel *= keep
    if strict:
        chained = [c for c in cands.values() if c.superseded_by in cands]
        for _ in range(len(chained)):  # the current link stands for its chain: it inherits the best match
            lifted = False
            for c in chained:
                succ = cands[c.superseded_by]  # type: ignore[index]
                if c.rel > succ.rel:
                    succ.rel, lifted = c.rel, True
            if not lifted:
                break
        for _ in range(len(chained)):  # a chain settles in at most its length of passes
            changed = False
            for c in chained:
                cap = keep * cands[c.superseded_by].rel  # type: ignore[index]
                if c.rel > cap:
                    c.rel, changed = cap, True
            if not changed:
                break


def evidence(c: Candidate, content_words: set[str] | None, reading: QueryReading) -> float:
    """How well this row matches the query on absolute scales (not relative to the pool):
    its cosine on the embedder's scale, or the share of the query's parts it holds (words of
    its own text, the agents the query names as its author, the dates as its time), or 1 for
    an exact keyword."""
    e = 0.0
    if c.cosine is not None:
        e = min(1.0, max(0.0, c.cosine - COSINE_FLOOR) / COSINE_SPAN)
    parts = len(reading.terms) + len(reading.named) + (1 if reading.dates else 0)
    if parts:
        held = (sum(1 for t in reading.terms if t[:STEM] in content_words) if content_words else 0) \
            + (1 if c.speaker else 0) + (1 if c.time >= 0.5 else 0)
        e = max(e, held / parts)
    if c.keyword:
        e = 1.0
    return e


def stems(text: str, pattern: object) -> set[str]:
    return {w[:STEM] for w in pattern.findall(text.lower())}  # type: ignore[attr-defined]


def relevance(cands: dict[int, Candidate]) -> float:
    """Sets ``relevance`` = quality · rel / max rel; returns the quality."""
    quality = max((c.evidence for c in cands.values()), default=0.0)
    top = _best([c.rel for c in cands.values()])
    for c in cands.values():
        c.relevance = quality * max(0.0, c.rel) / top
    return quality


def confidence(c: Candidate, ts_us: int, salience: float, now_us: int, w_r: float, tau_days: float,
               w_s: float) -> float:
    age_days = max(0.0, (now_us - ts_us) / DAY_US)
    recency = math.exp(-age_days / tau_days)  # e-folding: new vs 7-day-old at w=0.5 → Δ≈0.316
    return (1.0 - w_r - w_s) * c.relevance + w_r * recency + w_s * salience


def confidences(cands: dict[int, Candidate], attrs: Mapping[int, MemoryNode], cfg: RecallConfig, *,
                typed: bool, deep: bool) -> list[tuple[float, Candidate]]:
    """Each candidate with its confidence: recall filtered to a type weighs recency more, ``deep`` not at all."""
    if typed:
        w_r, tau = cfg.type_recency_weight, cfg.type_recency_half_life_days
    else:
        w_r, tau = cfg.recency_weight, cfg.recency_half_life_days
    now_us, w_r = time.time_ns() // 1000, 0.0 if deep else w_r
    return [(confidence(c, attrs[k].ts_us, attrs[k].salience, now_us, w_r, tau, cfg.salience_weight), c)
            for k, c in cands.items()]


def reason(conf: float, c: Candidate, rrf_k: int, refs: dict[int, str]) -> dict[str, object]:
    """``match_reason``: the confidence it keys on, and what each retriever and signal gave."""
    out: dict[str, object] = {"signal": "confidence", "score": round(conf, 4), "rsf": round(c.relevance, 4)}
    rrf = sum(1.0 / (rrf_k + r + 1) for r in c.ranks.values())
    if rrf:
        out["rrf"] = round(rrf, 5)
    if c.cosine is not None:
        out["cosine"] = round(c.cosine, 4)
    if c.window is not None:
        out["bm25"] = round(c.window, 4)
    if c.keyword is not None:
        out["keyword"] = round(c.keyword, 4)
    if c.graph:
        out["graph"] = round(c.graph, 4)
    if c.speaker:
        out["speaker"] = c.speaker
    if c.time:
        out["time"] = round(c.time, 3)
    if c.entity:
        out["entity"] = round(c.entity, 4)
        out["entities"] = list(c.entities)
    if c.entity_via is not None and c.entity_via in refs:
        out["entity_via"] = refs[c.entity_via]
    if c.neighbour_of is not None and c.neighbour_of in refs:
        out["neighbour_of"] = refs[c.neighbour_of]
    if c.superseded_by is not None and c.superseded_by in refs:
        out["superseded_by"] = refs[c.superseded_by]
    if c.rerank is not None:
        out["rerank"] = round(c.rerank, 4)
    return out


__all__ = ["Candidate", "base_scores", "confidence", "confidences", "evidence", "graph_scores", "reason", "relevance",
           "supersede", "vector_scale"]
