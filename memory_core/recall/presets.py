"""Retrieval strategy as named presets of one config object (not a pile of flags)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from memory_core.config import RecallSettings
from memory_core.errors import InvalidInputError


@dataclass(frozen=True)
class RecallConfig:
    """Everything that shapes one recall's ranking. Weights are relative inside a group."""

    # candidate pools (per retriever), as multiples of the limit with floors
    vector_pool: int = 100
    lexical_pool: int = 100
    keyword_pool: int = 30
    # fusion
    rrf_k: int = 60
    w_vector: float = 0.55
    w_lexical: float = 0.35
    w_keyword: float = 0.10
    # graph signals
    neighbour_radius: int = 1
    neighbour_discount: float = 0.6
    neighbour_seeds: int = 20
    speaker_boost: float = 0.15
    session_boost: float = 0.10
    # confidence mix
    salience_weight: float = 0.05
    recency_weight: float = 0.2
    recency_half_life_days: float = 30.0
    type_recency_weight: float = 0.5
    type_recency_half_life_days: float = 7.0
    # gate: rows whose confidence is below this are dropped
    quality_gate: float = 0.28
    # recall_with_context: weight of the context text in the query
    context_weight: float = 0.35


PRESETS: dict[str, RecallConfig] = {
    "balanced": RecallConfig(),
    # exact wording matters more (code, ids, logs)
    "lexical": RecallConfig(w_vector=0.35, w_lexical=0.50, w_keyword=0.15),
    # paraphrase-heavy conversations
    "semantic": RecallConfig(w_vector=0.70, w_lexical=0.22, w_keyword=0.08),
    # vector only (a baseline for benchmarks)
    "vector": RecallConfig(w_vector=1.0, w_lexical=0.0, w_keyword=0.0, neighbour_radius=0,
                           speaker_boost=0.0, session_boost=0.0),
}


def resolve_preset(name: str | None, settings: RecallSettings) -> RecallConfig:
    """The named preset with the recency and gate settings from configuration applied."""
    key = name or settings.preset
    if key not in PRESETS:
        raise InvalidInputError(f"Unknown recall preset '{key}'; choose one of {', '.join(sorted(PRESETS))}.")
    cfg = replace(
        PRESETS[key],
        recency_weight=settings.recency_weight,
        recency_half_life_days=settings.recency_half_life_days,
        type_recency_weight=settings.type_recency_weight,
        type_recency_half_life_days=settings.type_recency_half_life_days,
    )
    if settings.quality_gate is not None:
        cfg = replace(cfg, quality_gate=settings.quality_gate)
    return cfg
