"""Retrieval strategy as named presets of one config object (not a pile of flags).

:class:`RecallConfig` is one group per branch and per stage of the pipeline
(:mod:`memory_core.recall.engine`): each group is read by the module of its concern, and a new
branch or stage brings its own group. A preset is a recipe: :data:`PRESETS` names them
(Graphiti's ``search_config_recipes``); ``cfg.tuned({"lexical.own": 0.3})`` is a variant of one,
named ``group.field``.

The default ("balanced") is the hybrid, graph-aware method measured on three kinds of memory
(``bench.quality.locomo``: dialogue turns; ``bench.quality.madial``: life events; ``bench.quality.coding``: a coding
agent's notes, errors, decisions and handoffs). Its weights are round numbers chosen on all
three at once (``bench.quality.tune``) and checked leave-one-conversation-out on LoCoMo; dialogue
signals (window BM25, adjacency, session support) apply only to rows of type ``turn``. The other presets are
re-weightings of the same pipeline, and baselines for benchmarks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from memory_core.errors import InvalidInputError
from memory_core.settings.schema import RecallSettings


# ---- the branches ------------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryConfig:
    """Reading the query (:mod:`.query`) and embedding it."""

    # embed the query without the agents it names (the speaker signal has them)
    strip_names: bool = True
    # ... said as pronouns instead, the first agent named "I"/"my", the others "you"/"your": a turn is
    # written in the first person, a question about it in the third (bench.quality.tune, LoCoMo dev any@5 0.809 ->
    # 0.816, frac@10 0.809 -> 0.822; MADial and the coding set name no agent and score the same)
    name_pronouns: bool = True
    context_weight: float = 0.5  # recall_with_context: weight of the context text in the embedded query


@dataclass(frozen=True)
class VectorConfig:
    """The vector branch (:mod:`.branches.vector`)."""

    pool: int = 80  # nearest rows, the filters applied before the cut
    weight: float = 1.0  # × the cosine min-max scaled over the pool


@dataclass(frozen=True)
class DatedConfig:
    """A day the query names (:mod:`.branches.dated`): up to ``rows`` memories of that day are scored against
    the query and the nearest ``pool`` join the vector pool (0: off)."""

    rows: int = 64
    pool: int = 20


@dataclass(frozen=True)
class LexicalConfig:
    """The lexical branch (:mod:`.branches.lexical`): BM25 over a memory with the one before it (window)
    and over its own text."""

    pool: int = 80
    window: float = 0.6  # × BM25 over (text, previous text of the session), / best
    turn: float = 0.2  # × BM25 over the text alone, / best
    own: float | None = None  # BM25 of a row that is not a dialogue turn, over its own text (None: window + turn)
    # adaptive fusion: the weights above × clamp(best coverage of the query's words / adaptive_full,
    # adaptive_min, 1); adaptive_full = 0 turns it off
    adaptive_full: float = 0.5
    adaptive_min: float = 0.5


@dataclass(frozen=True)
class KeywordConfig:
    """Exact identifier phrases (:mod:`.branches.lexical`)."""

    # pool 30 -> 10 (and entity pool 50 -> 30): the same scores on the three workloads, p50 -0.8 ms at 100k
    pool: int = 10
    weight: float = 0.6  # × BM25 of the phrase, / best


@dataclass(frozen=True)
class EntityConfig:
    """The entity branch (:mod:`.branches.entity`): rows mentioning what the query names gain ``weight`` × the
    mean weight² of its entities they mention; the best ``seeds`` rows lift memories sharing a rare entity with
    them to at least ``hop`` × their base × the entity's weight (bench.quality.entities.recall: LoCoMo dev
    multi-hop any@5 0.704 -> 0.718, leave-one-conversation-out picks 0.4 over off in 4 of 5 conversations)."""

    weight: float = 0.3
    hop: float = 0.4
    seeds: int = 10
    pool: int = 30  # memories per entity (newest first)
    hop_df: float = 0.02  # a hop entity is mentioned by at most this share of the tenant's memories


# ---- the stages --------------------------------------------------------------------------------
@dataclass(frozen=True)
class FusionConfig:
    """How the branches' lists make a row's base (:mod:`.fusion`)."""

    method: str = "rsf"  # "rsf" adds each branch's weighted relative score; "rrf" adds 1/(rrf_k + rank)
    rrf_k: int = 60


@dataclass(frozen=True)
class SpeakerConfig:
    """The row's author is an agent the query names (:mod:`.scoring`).

    A lift, not a filter: a question can name the wrong agent (LoCoMo's adversarial category), and a turn
    by another agent that says what was asked must still come first. At 2.0 it did not (docs/performance.md).
    """

    weight: float = 1.0
    plain_name_share: float = 0.25  # share of the weight when the name reads as an ordinary word ("the user")
    scaled: bool = False  # the bonus times the row's share of the best base


@dataclass(frozen=True)
class NeighbourConfig:
    """A row lends shares of its base to the adjacent memories of its session (:mod:`.neighbours`)."""

    seeds: int = 40  # best-base rows (at least limit) whose absent neighbours join the pool
    spread_prev: float = 0.4  # ... to the one before it (a hit is often the reply to a question)
    spread_next: float = 0.1  # ... to the one after it


@dataclass(frozen=True)
class TurnContextConfig:
    """A turn gains ``weight`` × the scaled cosine of its author's previous turn (:mod:`.turn_context`;
    bench.quality.tune: LoCoMo dev any@5 0.818 -> 0.828, frac@10 0.822 -> 0.831, picked in each held-out
    conversation)."""

    weight: float = 0.4
    sources: int = 20  # ... from this many turns of the vector pool nearest the query


@dataclass(frozen=True)
class DatesConfig:
    """Dates the query names against the row's own timestamp (:mod:`.dates`)."""

    weight: float = 2.0  # absolute dates
    relative: float = 1.0  # relative dates ("yesterday"): times the row's share of the best base
    grace_days: float = 14.0
    tau_days: float = 14.0


@dataclass(frozen=True)
class SessionConfig:
    """Session support (:mod:`.scoring`): the mean of the session's best ``top`` scores, / best session."""

    weight: float = 0.3
    top: int = 3
    scaled: bool = False  # the bonus times the row's share of the best base


@dataclass(frozen=True)
class AnswerConfig:
    """Answer type (:mod:`.answer_type`): when the question asks when / how long / how many / where, each of
    the best ``rows`` rows holding a time / duration / number / place gains ``weight`` × its share of their
    best relevance (bench.quality.tune: LoCoMo dev any@5 0.816 -> 0.818, temporal 0.872 -> 0.891)."""

    weight: float = 0.3
    rows: int = 20
    # ... and each of them whose text ends by asking a question (hands the floor over rather than tells)
    # loses this share of its relevance (bench.quality.tune: LoCoMo dev any@5 0.832 -> 0.840; coding MRR 0.811 -> 0.817)
    asking_penalty: float = 0.1


@dataclass(frozen=True)
class SupersedeConfig:
    """Chains (:mod:`.superseded`): a memory another one SUPERSEDES (an older handoff) loses this share."""

    penalty: float = 0.3


@dataclass(frozen=True)
class StaleConfig:
    """Stale facts (:mod:`.stale`): among the best ``pool`` kept rows (0: off), an older row a newer one about
    the same entities (at most ``unshared`` not shared, each side) contradicts (cosine in [``low``, ``high``),
    texts differ) gets at most ``step`` × its confidence. Measured with ``python -m bench.quality.updates``
    and the coding set (docs/performance.md)."""

    pool: int = 24
    unshared: int = 1
    near: float = 0.85  # only for a newer row that answers the query about as well: confidence ≥ near × its own
    low: float = 0.75
    high: float = 1.01  # a restatement of the same value steps aside too; an exact copy is a repeat (collapse)
    step: float = 0.9
    # records of what happened do not go stale (a turn, an event, an error); handoffs have their own chains
    skip_types: frozenset[str] = frozenset({"turn", "handoff", "event", "error"})


@dataclass(frozen=True)
class ConfidenceConfig:
    """confidence = (1 - recency - salience weights) × relevance + recency weight × recency + salience weight ×
    salience (:mod:`.scoring`); recall filtered to a type weighs recency more (the recency values come from
    the settings, :func:`resolve_preset`)."""

    salience_weight: float = 0.05
    recency_weight: float = 0.2
    recency_half_life_days: float = 30.0
    type_recency_weight: float = 0.5
    type_recency_half_life_days: float = 7.0


@dataclass(frozen=True)
class GateConfig:
    """The quality gate (:mod:`.gate`): when the best row's confidence is below ``quality`` nothing passes;
    rows whose relevance is below ``min_relevance`` never pass (recency and salience alone never carry a row
    through)."""

    quality: float = 0.15
    min_relevance: float = 0.08
    evidence: float = 0.3  # ... a row passes on its own absolute evidence (0..1) reaching this
    row: float | None = 0.0  # ... or on its confidence reaching this, once the best passed (None: quality)


@dataclass(frozen=True)
class AskedConfig:
    """What was asked, under the newest-first rule (:mod:`.asked`; bench.quality.handoffs)."""

    sample: int = 200  # the newest rows of the type whose words are counted
    min_rows: int = 4  # fewer say nothing about which words they share (only the type's name is left out)
    shared_share: float = 0.9  # a query word held by this share of them is one they all say
    relative: float = 0.4  # a row that passed the gate stays at this share of the best relevance ...
    anchor: float = 0.7  # ... or when it reads like one of the (at most ``anchors``) rows at this share:
    anchors: int = 3
    # its embedding this close (cosine) to theirs, a value on the embedder's own scale (None: the embedder's,
    # EMBEDDER_DEFAULTS)
    link: float | None = None


@dataclass(frozen=True)
class RerankConfig:
    """A second stage (:mod:`.rerank`): a cross-encoder re-reads the best ``top`` rows (0: none), its
    standardised logit blended with recall's standardised confidence at ``weight`` (bench.quality.rerank;
    leave-one-conversation-out on LoCoMo picked 0.4 with the head at 20 for 4 of 5 conversations)."""

    top: int = 0
    weight: float = 0.4


@dataclass(frozen=True)
class RecallConfig:
    """Everything that shapes one recall's ranking: one group per branch and per stage."""

    query: QueryConfig = QueryConfig()
    vector: VectorConfig = VectorConfig()
    dated: DatedConfig = DatedConfig()
    lexical: LexicalConfig = LexicalConfig()
    keyword: KeywordConfig = KeywordConfig()
    entity: EntityConfig = EntityConfig()
    fusion: FusionConfig = FusionConfig()
    speaker: SpeakerConfig = SpeakerConfig()
    neighbours: NeighbourConfig = NeighbourConfig()
    context: TurnContextConfig = TurnContextConfig()
    dates: DatesConfig = DatesConfig()
    session: SessionConfig = SessionConfig()
    answer: AnswerConfig = AnswerConfig()
    supersede: SupersedeConfig = SupersedeConfig()
    stale: StaleConfig = StaleConfig()
    confidence: ConfidenceConfig = ConfidenceConfig()
    gate: GateConfig = GateConfig()
    asked: AskedConfig = AskedConfig()
    rerank: RerankConfig = RerankConfig()

    def value(self, name: str) -> Any:
        """The value of ``group.field``."""
        group, key = _split(name)
        return getattr(getattr(self, group), key)

    def tuned(self, changes: Mapping[str, Any]) -> RecallConfig:
        """This config with each ``group.field`` of ``changes`` set: a preset's variant (``bench.quality.tune``,
        an embedder's defaults)."""
        groups: dict[str, dict[str, Any]] = {}
        for name, value in changes.items():
            group, key = _split(name)
            groups.setdefault(group, {})[key] = value
        return replace(self, **{g: replace(getattr(self, g), **kv) for g, kv in groups.items()})


def _split(name: str) -> tuple[str, str]:
    group, _, key = name.partition(".")
    if key not in _GROUPS.get(group, ()):
        raise ValueError(f"'{name}' names no recall config field (group.field; groups: {', '.join(_GROUPS)}).")
    return group, key


_BALANCED = RecallConfig()
_GROUPS = {g.name: frozenset(f.name for f in fields(getattr(_BALANCED, g.name))) for g in fields(_BALANCED)}


# the graph-aware stages off: the baselines below are plain fusions of the retrievers
_NO_GRAPH: dict[str, Any] = {
    "speaker.weight": 0.0, "neighbours.spread_prev": 0.0, "neighbours.spread_next": 0.0, "dates.weight": 0.0,
    "dates.relative": 0.0, "session.weight": 0.0, "dated.pool": 0, "entity.weight": 0.0, "entity.hop": 0.0,
    "answer.weight": 0.0, "context.weight": 0.0, "answer.asking_penalty": 0.0, "supersede.penalty": 0.0,
    "query.strip_names": False,
}

PRESETS: dict[str, RecallConfig] = {
    "balanced": _BALANCED,
    # balanced, then the cross-encoder over its best 20 rows: tens of ms more a recall (the 'rerank' extra)
    "balanced-rerank": _BALANCED.tuned({"rerank.top": 20}),
    # exact wording matters more (code, ids, logs)
    "lexical": _BALANCED.tuned({"vector.weight": 0.6, "lexical.window": 0.8, "lexical.turn": 0.4,
                                "keyword.weight": 0.6, "lexical.own": 1.2}),
    # paraphrase-heavy conversations
    "semantic": _BALANCED.tuned({"vector.weight": 1.3, "lexical.window": 0.4, "lexical.turn": 0.1,
                                 "lexical.own": 0.5}),
    # baselines for benchmarks: relative-score and reciprocal-rank fusion of vector + BM25, vector alone
    "rsf": _BALANCED.tuned({"lexical.window": 0.0, "lexical.turn": 1.0, "keyword.weight": 0.0, "lexical.own": 1.0,
                            **_NO_GRAPH}),
    "rrf": _BALANCED.tuned({"fusion.method": "rrf", "lexical.window": 0.0, "lexical.turn": 1.0,
                            "keyword.weight": 0.0, "lexical.own": 1.0, **_NO_GRAPH}),
    "vector": _BALANCED.tuned({"lexical.window": 0.0, "lexical.turn": 0.0, "keyword.weight": 0.0,
                               "lexical.own": 0.0, **_NO_GRAPH}),
}


# what a preset leaves unset (None) takes the embedder's value, for models measured with bench.quality.tune and
# bench.quality.handoffs (``group.field`` names); a model not measured takes MiniLM's. With the removed
# all-mpnet-base-v2 provider a non-dialogue row's own-text BM25 weighed 0.3 (its vector branch alone beat MiniLM's by
# 0.12 hit@5 on MADial's events, and MiniLM's 0.8 pulled recall below that branch); no model of fastembed's catalogue
# has been measured yet. How close two handoffs of one piece of work read is a cosine on the model's own scale:
# MiniLM 0.58 (bench.quality.handoffs --stores 16: newest handoff first on stores of several topics 0.583 at 0.55,
# 0.622 at 0.58, 0.635 at 0.6; on single-topic stores 0.828, 0.828, 0.750);
# the hash embedder (a bag of words hashed to 64 dimensions, for tests) says little about meaning: 0.3 keeps the
# write-ups of one piece of work in tests/memory_core/recall/test_recall_type_order.py together (0.37-0.72) and a
# one-line handoff about nothing else out (0.0-0.1); texts without a shared prefix collide up to 0.43
MINILM = "all-MiniLM-L6-v2-onnx-int8"
EMBEDDER_DEFAULTS: dict[str, dict[str, float]] = {
    MINILM: {"asked.link": 0.58},
    "hash-bow": {"asked.link": 0.3},
}


def resolve_preset(name: str | None, settings: RecallSettings, embedder: str | None = None) -> RecallConfig:
    """The named preset with the recency and gate settings from configuration applied, and what it
    leaves unset taken from the embedder's defaults (:data:`EMBEDDER_DEFAULTS`; MiniLM's for a model not measured)."""
    key = name or settings.preset
    if key not in PRESETS:
        raise InvalidInputError(f"Unknown recall preset '{key}'; choose one of {', '.join(sorted(PRESETS))}.")
    base = PRESETS[key]
    measured = {**EMBEDDER_DEFAULTS[MINILM], **EMBEDDER_DEFAULTS.get(embedder or "", {})}
    unset = {k: v for k, v in measured.items() if base.value(k) is None}
    changes: dict[str, Any] = {
        **unset,
        "confidence.recency_weight": settings.recency_weight,
        "confidence.recency_half_life_days": settings.recency_half_life_days,
        "confidence.type_recency_weight": settings.type_recency_weight,
        "confidence.type_recency_half_life_days": settings.type_recency_half_life_days,
    }
    if settings.quality_gate is not None:
        changes["gate.quality"] = settings.quality_gate
    return base.tuned(changes)
