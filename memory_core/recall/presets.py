"""Retrieval strategy as named presets of one config object (not a pile of flags).

The default ("balanced") is the hybrid, graph-aware method measured on three kinds of memory
(``bench.quality.locomo``: dialogue turns; ``bench.quality.madial``: life events; ``bench.quality.coding``: a coding
agent's notes, errors, decisions and handoffs). Its weights are round numbers chosen on all
three at once (``bench.quality.tune``) and checked leave-one-conversation-out on LoCoMo; dialogue
signals (window BM25, adjacency, session support) apply only to rows of type ``turn``. The other presets are
re-weightings of the same pipeline, and baselines for benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from memory_core.errors import InvalidInputError
from memory_core.settings.schema import RecallSettings


@dataclass(frozen=True)
class RecallConfig:
    """Everything that shapes one recall's ranking (see :mod:`memory_core.recall.scoring`)."""

    # candidate pools per retriever (each with the filters applied inside the query)
    vector_pool: int = 80
    lexical_pool: int = 80
    # keyword_pool 30 -> 10 and entity_pool 50 -> 30: the same scores on the three workloads, p50 -0.8 ms at 100k
    keyword_pool: int = 10
    # fusion: "rsf" adds relative scores with the weights below; "rrf" adds 1/(rrf_k + rank)
    fusion: str = "rsf"
    rrf_k: int = 60
    # query reading: embed the query without the agents it names (the speaker signal has them)
    strip_names: bool = True
    # ... said as pronouns instead, the first agent named "I"/"my", the others "you"/"your": a turn is
    # written in the first person, a question about it in the third (bench.quality.tune, LoCoMo dev any@5 0.809 ->
    # 0.816, frac@10 0.809 -> 0.822; MADial and the coding set name no agent and score the same)
    name_pronouns: bool = True
    # base score of a candidate
    w_vector: float = 1.0  # cosine, min-max scaled over the vector pool
    w_window: float = 0.6  # BM25 over (text, previous text of the session), / best
    w_turn: float = 0.2  # BM25 over the text alone, / best
    w_keyword: float = 0.6  # exact identifier phrase, / best
    w_own: float | None = None  # BM25 of a row that is not a dialogue turn, over its own text (None: w_window + w_turn)
    # adaptive fusion: lexical weights × clamp(best coverage of the query's words / adaptive_full,
    # adaptive_min, 1); adaptive_full = 0 turns it off
    adaptive_full: float = 0.5
    adaptive_min: float = 0.5
    w_speaker: float = 2.0  # the row's author is an agent the query names
    plain_name_share: float = 0.25  # share of w_speaker when the name reads as an ordinary word ("the user")
    speaker_scaled: bool = False  # the speaker bonus times the row's share of the best retriever score
    # graph: a row lends shares of its base to the adjacent memories of its session
    spread_prev: float = 0.4  # ... to the one before it (a hit is often the reply to a question)
    spread_next: float = 0.1  # ... to the one after it
    # ... and a turn gains w_context × the scaled cosine of its author's previous turn (:mod:`.turn_context`;
    # bench.quality.tune: LoCoMo dev any@5 0.818 -> 0.828, frac@10 0.822 -> 0.831, picked in each held-out conversation)
    w_context: float = 0.4
    context_sources: int = 20  # ... from this many turns of the vector pool nearest the query
    neighbour_seeds: int = 40  # best-base rows (at least 2 × limit) whose absent neighbours join the pool
    # time: absolute dates in the query against the row's own timestamp
    w_time: float = 2.0
    w_time_relative: float = 1.0  # relative dates ("yesterday"): times the row's share of the best base
    time_grace_days: float = 14.0
    time_tau_days: float = 14.0
    # a day the query names (:mod:`.dated`): up to dated_rows memories of that day are scored against the
    # query and the nearest dated_pool join the vector pool (0: off)
    dated_rows: int = 64
    dated_pool: int = 20
    # session support: mean of the session's best `session_top` scores, / best session
    w_session: float = 0.3
    session_top: int = 3
    session_scaled: bool = False  # the bonus times the row's share of the best base
    # entities (:mod:`.entity_branch`): rows mentioning what the query names gain w_entity × the mean
    # weight² of its entities they mention; the best entity_seeds rows lift memories sharing a rare entity
    # with them to at least entity_hop × their base × the entity's weight (bench.quality.entities.recall: LoCoMo dev
    # multi-hop any@5 0.704 -> 0.718, leave-one-conversation-out picks 0.4 over off in 4 of 5 conversations)
    w_entity: float = 0.3
    entity_hop: float = 0.4
    entity_seeds: int = 10
    entity_pool: int = 30  # memories per entity (newest first)
    entity_hop_df: float = 0.02  # a hop entity is mentioned by at most this share of the tenant's memories
    # answer type (:mod:`.answer_type`): when the question asks when / how long / how many / where, each of
    # the best answer_rows rows holding a time / duration / number / place gains w_answer × its share of
    # their best relevance (bench.quality.tune: LoCoMo dev any@5 0.816 -> 0.818, temporal 0.872 -> 0.891)
    w_answer: float = 0.3
    answer_rows: int = 20
    # ... and each of them whose text ends by asking a question (hands the floor over rather than tells)
    # loses this share of its relevance (bench.quality.tune: LoCoMo dev any@5 0.832 -> 0.840; coding MRR 0.811 -> 0.817)
    asking_penalty: float = 0.1
    # a memory another one SUPERSEDES (an older handoff of the chain) loses this share
    superseded_penalty: float = 0.3
    # confidence = (1 - w_recency - w_salience) * relevance + w_recency * recency + w_salience * salience
    salience_weight: float = 0.05
    recency_weight: float = 0.2
    recency_half_life_days: float = 30.0
    type_recency_weight: float = 0.5
    type_recency_half_life_days: float = 7.0
    # gate: rows whose confidence is below this are dropped, and rows whose relevance is
    # below min_relevance (recency and salience alone never carry a row through)
    quality_gate: float = 0.15
    min_relevance: float = 0.08
    evidence_gate: float = 0.3  # ... unless the row's own absolute evidence reaches this (0..1)
    row_gate: float | None = 0.0  # the confidence each row needs once the best passed (None: quality_gate)
    # recall_with_context: weight of the context text in the embedded query
    context_weight: float = 0.5
    # a second stage (:mod:`.rerank`): a cross-encoder re-reads the best rerank_top rows (0: none), its
    # standardised logit blended with recall's standardised confidence at rerank_weight (bench.quality.rerank;
    # leave-one-conversation-out on LoCoMo picked 0.4 with the head at 20 for 4 of 5 conversations)
    rerank_top: int = 0
    rerank_weight: float = 0.4


_NO_GRAPH = {"w_speaker": 0.0, "spread_prev": 0.0, "spread_next": 0.0, "w_time": 0.0, "w_time_relative": 0.0,
             "w_session": 0.0, "dated_pool": 0, "w_entity": 0.0, "entity_hop": 0.0, "w_answer": 0.0, "w_context": 0.0,
             "asking_penalty": 0.0,
             "superseded_penalty": 0.0, "strip_names": False}

PRESETS: dict[str, RecallConfig] = {
    "balanced": RecallConfig(),
    # balanced, then the cross-encoder over its best 20 rows: tens of ms more a recall (the 'rerank' extra)
    "balanced-rerank": RecallConfig(rerank_top=20),
    # exact wording matters more (code, ids, logs)
    "lexical": RecallConfig(w_vector=0.6, w_window=0.8, w_turn=0.4, w_keyword=0.6, w_own=1.2),
    # paraphrase-heavy conversations
    "semantic": RecallConfig(w_vector=1.3, w_window=0.4, w_turn=0.1, w_own=0.5),
    # baselines for benchmarks: relative-score and reciprocal-rank fusion of vector + BM25, vector alone
    "rsf": RecallConfig(w_window=0.0, w_turn=1.0, w_keyword=0.0, w_own=1.0, **_NO_GRAPH),  # type: ignore[arg-type]
    "rrf": RecallConfig(fusion="rrf", w_window=0.0, w_turn=1.0, w_keyword=0.0, w_own=1.0, **_NO_GRAPH),  # type: ignore[arg-type]
    "vector": RecallConfig(w_window=0.0, w_turn=0.0, w_keyword=0.0, w_own=0.0, **_NO_GRAPH),  # type: ignore[arg-type]
}


# what a preset leaves unset (None) takes the embedder's value, for models measured with bench.quality.tune. With the
# removed all-mpnet-base-v2 provider a non-dialogue row's own-text BM25 weighed 0.3 (its vector branch alone beat
# MiniLM's by 0.12 hit@5 on MADial's events, and MiniLM's 0.8 pulled recall below that branch); no model of
# fastembed's catalogue has been measured yet, so every one keeps the preset's weights
EMBEDDER_DEFAULTS: dict[str, dict[str, float]] = {}


def resolve_preset(name: str | None, settings: RecallSettings, embedder: str | None = None) -> RecallConfig:
    """The named preset with the recency and gate settings from configuration applied, and what it
    leaves unset taken from the embedder's defaults (:data:`EMBEDDER_DEFAULTS`)."""
    key = name or settings.preset
    if key not in PRESETS:
        raise InvalidInputError(f"Unknown recall preset '{key}'; choose one of {', '.join(sorted(PRESETS))}.")
    base = PRESETS[key]
    unset: dict[str, Any] = {k: v for k, v in EMBEDDER_DEFAULTS.get(embedder or "", {}).items()
                             if getattr(base, k) is None}
    cfg = replace(
        base, **unset,
        recency_weight=settings.recency_weight,
        recency_half_life_days=settings.recency_half_life_days,
        type_recency_weight=settings.type_recency_weight,
        type_recency_half_life_days=settings.type_recency_half_life_days,
    )
    if settings.quality_gate is not None:
        cfg = replace(cfg, quality_gate=settings.quality_gate)
    return cfg
