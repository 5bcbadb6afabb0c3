"""One recall's pool: the rows its branches found, as candidates that every stage reads and updates.

Every branch (:mod:`.branches`) answers with ranked lists of :class:`.branches.api.Hit`, the same shape
from each (Graphiti's uniform hit lists): a row's id, the branch's raw score, whether the row is an episode.
:meth:`Pool.join` puts the lists together by row, in the branch list's order, so that fusion
(:mod:`.fusion`) and ``match_reason`` read every branch the same way: a row's hit and its rank in each
list that holds it. The stages (:data:`memory_core.recall.engine.STAGES`) then run one after another
over the one :class:`Pool`, :func:`admit` first: it re-checks every row against its graph node.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph.api import GraphStore, Key, MemoryNode
from memory_core.reads import episode_attrs
from memory_core.recall.branches.api import Branch, Hit, Ranked
from memory_core.recall.filters import RecallFilters
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import QueryReading
from memory_core.recall.stages import Stages

if TYPE_CHECKING:
    from memory_core.embedding.api import Embedder
    from memory_core.recall.rerank import PairScorer
    from memory_core.vectors.api import VectorStore

# the lists the stages read by name (a branch's other lists reach fusion and match_reason without one)
VECTOR = "vector"  # cosine of the embedded query
BM25 = "bm25"  # BM25 over a memory and the one before it (the window); the hit's ``turn``: over its own text
KEYWORD = "keyword"  # BM25 of an exact phrase of the query
ENTITY = "entity"  # the mean weight² of the query's entities the row mentions


@dataclass(frozen=True, slots=True)
class StaleMark:
    """Why a row is possibly stale (:mod:`.stale`): the newer row, their cosine, the entities they share."""

    newer: int
    cosine: float
    entities: tuple[int, ...]


@dataclass(slots=True)
class Candidate:
    """A row of the pool: what the branches found of it and what the stages made of it."""

    id: int
    episode: bool = False
    dialogue: bool = False  # a dialogue turn: window BM25, adjacency and session support apply
    hits: dict[str, Hit] = field(default_factory=dict)  # its hit in each list that holds it
    ranks: dict[str, int] = field(default_factory=dict)  # its rank there
    vec: float = 0.0  # the cosine min-max scaled over the vector pool (what the vector weight multiplies)
    prev: int | None = None  # adjacent admitted memories of the session
    next: int | None = None
    neighbour_of: int | None = None  # joined the pool only as an adjacent memory of this one
    speaker: str | None = None
    superseded_by: int | None = None
    stale: StaleMark | None = None  # a newer row about the same things says something else (:mod:`.stale`)
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

    def _score(self, name: str) -> float | None:
        hit = self.hits.get(name)
        return None if hit is None else hit.score

    @property
    def cosine(self) -> float | None:
        """Raw cosine of the embedded query."""
        return self._score(VECTOR)

    @property
    def window(self) -> float | None:
        """Raw BM25 over (text, previous text)."""
        return self._score(BM25)

    @property
    def turn(self) -> float | None:
        """Raw BM25 over the text alone (0: only the previous text matched)."""
        hit = self.hits.get(BM25)
        return None if hit is None else hit.turn

    @property
    def keyword(self) -> float | None:
        """Raw BM25 of an exact phrase."""
        return self._score(KEYWORD)


Scored = tuple[float, Candidate]  # a row with its confidence
Around = dict[int, tuple[Key | None, Key | None]]  # memory id -> keys of the memories before and after it


@dataclass
class Pool:
    """One recall's candidates and what its stages read and write."""

    graph: GraphStore
    filters: RecallFilters
    reading: QueryReading
    cfg: RecallConfig
    limit: int
    deep: bool = False
    collapsing: bool = True
    diagnostics: dict[str, Any] = field(default_factory=dict)
    stages: Stages = field(default_factory=Stages)
    scorer: Callable[[], PairScorer] | None = None  # the rerank model, loaded on first use
    branches: Sequence[Branch] = ()  # the branches that ran, in the branch list's order
    vectors: VectorStore | None = None  # for a stage that compares rows' embeddings (:mod:`.asked`)
    embedder: Embedder | None = None
    telling: bool = False  # newest first: the query tells the rows of its type apart (:mod:`.asked`)
    # what the branches found, and the rows
    lists: dict[str, Ranked] = field(default_factory=dict)
    cands: dict[int, Candidate] = field(default_factory=dict)
    attrs: dict[int, MemoryNode] = field(default_factory=dict)  # the admitted rows' graph nodes
    read: set[int] = field(default_factory=set)  # rows whose text admit reads (beside exclude_contents' reads)
    texts: dict[int, str] = field(default_factory=dict)  # the texts read so far
    words: dict[int, set[str]] = field(default_factory=dict)  # the word stems of the rows in ``read``
    share: dict[str, float] = field(default_factory=dict)  # how much a branch counts for this query (default 1)
    around: Around = field(default_factory=dict)  # the session adjacency read (:mod:`.neighbours`)
    # the ranking's ends
    scored: list[Scored] = field(default_factory=list)  # every row with its confidence
    kept: list[Scored] = field(default_factory=list)  # those the gate kept
    fallback: list[Candidate] | None = None  # nothing passed the gate: these lexical matches instead
    ranked: list[Scored] = field(default_factory=list)  # the kept rows in their final order
    order: str | None = None  # RecallResult.order

    def join(self, ranked: Sequence[Ranked]) -> None:
        """The branches' lists, by row: each row's hit and rank in each list, in the order given."""
        cands = self.cands
        for found in ranked:
            self.lists[found.name] = found
            for rank, hit in enumerate(found.hits):
                c = cands.get(hit.id)
                if c is None:
                    c = cands[hit.id] = Candidate(hit.id, episode=hit.episode)
                c.hits[found.name] = hit
                c.ranks[found.name] = rank

    def labels(self) -> dict[str, str]:
        """The match_reason key of each list that shows its raw scores."""
        return {name: found.label for name, found in self.lists.items() if found.label}

    def text(self, ids: Sequence[int]) -> dict[int, str]:
        """The texts of these admitted rows (an episode's summary), read once a recall."""
        unread = {k: self.attrs[k] for k in ids if k not in self.texts and k in self.attrs}
        if unread:
            self.texts.update(read_texts(self.graph, self.filters.tenant, unread))
        return {k: self.texts[k] for k in ids if k in self.texts}


def read_texts(graph: GraphStore, tenant: str, attrs: dict[int, MemoryNode]) -> dict[int, str]:
    """The texts of these rows: a memory's content, an episode's summary."""
    out = graph.contents(tenant, [k for k, a in attrs.items() if a.kind != "EPISODE"])
    for k, a in attrs.items():
        if a.kind == "EPISODE" and (ep := graph.episode(tenant, k)) is not None:
            out[k] = ep.summary
    return out


def admit(pool: Pool) -> None:
    """Every row re-checked against its graph node (tenant, visibility, filters) and ``exclude_contents``;
    the texts of ``pool.read`` are read with the excluded ones. Dialogue turns are marked."""
    g, filters, cands = pool.graph, pool.filters, pool.cands
    nodes = g.memories(filters.tenant, [k for k, c in cands.items() if not c.episode])
    attrs = pool.attrs
    for item_id, c in cands.items():
        if c.episode:
            ep = g.episode(filters.tenant, item_id)
            if ep is not None and filters.admits_episode(ep, g.session_has_channel):
                attrs[item_id] = episode_attrs(ep)
        elif (a := nodes.get(item_id)) is not None and filters.admits(a):
            attrs[item_id] = a
    wanted = {k: a for k, a in attrs.items() if filters.excludes or k in pool.read}
    pool.texts.update(read_texts(g, filters.tenant, wanted))
    contents = pool.texts
    for mem_id in list(cands):
        gone = mem_id not in attrs or (mem_id in wanted and mem_id not in contents)
        if gone or (filters.excludes and filters.excluded(contents[mem_id])):
            del cands[mem_id]
        else:
            cands[mem_id].dialogue = attrs[mem_id].type == "turn"
