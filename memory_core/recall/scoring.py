"""Scoring one recall's candidates: pure arithmetic over what the branches and the graph found.

For each candidate row ``i`` the stages add up (weights from :class:`RecallConfig`'s groups)::

    base_i   = Σ over the branches of its weighted relative score      (:mod:`.fusion`)
               + speaker·[author named]                                  (:func:`speaker`)
               + one hop of a rare entity shared with a best row          (:mod:`.branches.entity`)
    rel_i    = base_i + spread_prev·base_next(i) + spread_next·base_prev(i)   (:mod:`.neighbours`)
               + dates·τ_i + relative·ρ_i·base_i/max base                 (:mod:`.dates`)
               + session·sess(session_i) / max sess                       (:func:`session`; turns)
               + the author's previous turn, answer types, chains          (their modules)

Relevance in 0..1 is ``quality · rel_i / max rel`` (:func:`relevance`): the ranking inside the query
times how well the query matched at all (``quality`` = the best absolute evidence in the pool:
cosine on the embedder's scale, share of the query's words a row holds, an exact keyword). The
confidence (:func:`confidence`) mixes it with recency and salience.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from memory_core.recall.fusion import best, rrf
from memory_core.recall.query import STEM, QueryReading

if TYPE_CHECKING:
    from graph.api import MemoryNode
    from memory_core.recall.pool import Candidate, Pool, Scored
    from memory_core.recall.presets import RecallConfig

DAY_US = 86_400 * 1_000_000
# cosine below the floor is treated as no similarity; floor + span as full similarity (MiniLM scale)
COSINE_FLOOR = 0.10
COSINE_SPAN = 0.60


def speaker(pool: Pool) -> None:
    """Stage: a row whose author is an agent the query names gains ``speaker.weight`` (a share of it when
    the name reads as an ordinary word, "the user"). Joined neighbours only get the spread."""
    cfg, cands, reading = pool.cfg.speaker, pool.cands, pool.reading
    if not reading.named or not cfg.weight:
        return
    top = best([c.base for c in cands.values()])
    for k, c in cands.items():
        author = pool.attrs[k].agent
        if c.neighbour_of is None and author in reading.named:
            c.speaker = author
            bonus = cfg.weight * (max(0.0, c.base) / top if cfg.scaled else 1.0)
            if author not in reading.as_name:  # "the user", "the reviewer"
                bonus *= cfg.plain_name_share
            c.base += bonus
            c.graph += bonus


def session(pool: Pool) -> None:
    """Stage: session support: several turns of one conversation about the query lift each other
    (the mean of the session's best ``session.top`` rels, over the best session's)."""
    cfg, cands = pool.cfg.session, pool.cands
    if not cfg.weight or not cands:
        return
    by_session: dict[str, list[float]] = {}
    for k, c in cands.items():
        if c.dialogue:
            by_session.setdefault(pool.attrs[k].session, []).append(c.rel)
    support = {s: sum(sorted(xs, reverse=True)[: cfg.top]) / min(len(xs), cfg.top) for s, xs in by_session.items()}
    top = best(list(support.values()))
    base_top = best([c.base for c in cands.values()])
    for k, c in cands.items():
        if not c.dialogue:
            continue
        bonus = cfg.weight * max(0.0, support[pool.attrs[k].session]) / top
        if cfg.scaled:  # reorders turns by their conversation, never lifts them over other rows
            bonus *= max(0.0, c.base) / base_top
        c.rel += bonus
        c.graph += bonus


def evidence(c: Candidate, content_words: set[str] | None, reading: QueryReading) -> float:
    """How well this row matches the query on absolute scales (not relative to the pool):
    its cosine on the embedder's scale, or the share of the query's parts it holds (words of
    its own text, the agents the query names as its author, the dates as its time), or 1 for
    an exact keyword."""
    e = 0.0
    if (cosine := c.cosine) is not None:
        e = min(1.0, max(0.0, cosine - COSINE_FLOOR) / COSINE_SPAN)
    parts = len(reading.terms) + len(reading.named) + (1 if reading.dates else 0)
    if parts:
        held = (sum(1 for t in reading.terms if t[:STEM] in content_words) if content_words else 0) \
            + (1 if c.speaker else 0) + (1 if c.time >= 0.5 else 0)
        e = max(e, held / parts)
    if c.keyword:
        e = 1.0
    return e


def relevance(pool: Pool) -> None:
    """Stage: each row's absolute ``evidence``, and ``relevance`` = quality · rel / max rel, where the quality
    is the best evidence in the pool (the diagnostics report it)."""
    cands = pool.cands
    for k, c in cands.items():
        c.evidence = evidence(c, pool.words.get(k), pool.reading)
    quality = max((c.evidence for c in cands.values()), default=0.0)
    top = best([c.rel for c in cands.values()])
    for c in cands.values():
        c.relevance = quality * max(0.0, c.rel) / top
    pool.diagnostics.update(candidates=len(cands), quality=round(quality, 4))


def confidence(c: Candidate, ts_us: int, salience: float, now_us: int, w_r: float, tau_days: float,
               w_s: float) -> float:
    age_days = max(0.0, (now_us - ts_us) / DAY_US)
    recency = math.exp(-age_days / tau_days)  # e-folding: new vs 7-day-old at w=0.5 → Δ≈0.316
    return (1.0 - w_r - w_s) * c.relevance + w_r * recency + w_s * salience


def confidences(cands: Mapping[int, Candidate], attrs: Mapping[int, MemoryNode], cfg: RecallConfig, *,
                typed: bool, deep: bool, now_us: int | None = None) -> list[Scored]:
    """Each candidate with its confidence: recall filtered to a type weighs recency more, ``deep`` not at all.
    Recency counts from ``now_us`` (an ``as_of`` recall: that instant; default now)."""
    conf = cfg.confidence
    if typed:
        w_r, tau = conf.type_recency_weight, conf.type_recency_half_life_days
    else:
        w_r, tau = conf.recency_weight, conf.recency_half_life_days
    now_us, w_r = time.time_ns() // 1000 if now_us is None else now_us, 0.0 if deep else w_r
    return [(confidence(c, attrs[k].ts_us, attrs[k].salience, now_us, w_r, tau, conf.salience_weight), c)
            for k, c in cands.items()]


def weigh(pool: Pool) -> None:
    """Stage: every row's relevance weighed with its recency and salience into its confidence (``pool.scored``)."""
    pool.scored = confidences(pool.cands, pool.attrs, pool.cfg, typed=bool(pool.filters.type), deep=pool.deep,
                              now_us=pool.filters.as_of_us)


def reason(conf: float, c: Candidate, rrf_k: int, refs: dict[int, str], labels: Mapping[str, str]) -> dict[str, object]:
    """``match_reason``: the confidence it keys on, and what each branch and signal gave (a list's raw
    score under its ``labels`` key)."""
    out: dict[str, object] = {"signal": "confidence", "score": round(conf, 4), "rsf": round(c.relevance, 4)}
    fused = rrf(c.ranks, rrf_k)
    if fused:
        out["rrf"] = round(fused, 5)
    for name, hit in c.hits.items():
        if (label := labels.get(name)) is not None:
            out[label] = round(hit.score, 4)
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
    if c.stale is not None and c.stale.newer in refs:
        out["stale"] = {"newer": refs[c.stale.newer], "cosine": c.stale.cosine,
                        "entities": [f"ent:{e}" for e in c.stale.entities]}
    if c.rerank is not None:
        out["rerank"] = round(c.rerank, 4)
    return out


__all__ = ["COSINE_FLOOR", "COSINE_SPAN", "confidence", "confidences", "evidence", "reason", "relevance",
           "session", "speaker", "weigh"]
