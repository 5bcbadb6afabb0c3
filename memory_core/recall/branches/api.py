"""The branch seam: what a branch is asked (:class:`Ask`) and what it answers (ranked lists of :class:`Hit`).

A branch is a module of this package with:

- ``NAME``: its stage in ``diagnostics["stages_ms"]``;
- ``EMBEDDED``: whether it reads the query's embedding. One that does runs on the calling thread
  once the query is embedded; one that does not runs on a recall worker beside the embedding;
- ``wanted(cfg)``: whether it runs under this config (a weight of 0 leaves it out);
- ``search(ask) -> list[Ranked]``: its lists, each best first, every filter applied before any cut;
- ``fuse(pool)``: under relative-score fusion, its weighted share added to each row's ``base``
  (:mod:`memory_core.recall.fusion`), scaled as only it knows (its config group in
  :class:`memory_core.recall.presets.RecallConfig`).

Every branch answers with the same :class:`Hit`, so joining the lists (:meth:`.Pool.join`),
reciprocal-rank fusion and ``match_reason`` read them the same way (Graphiti's uniform hit lists).
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from graph.api import GraphStore
from memory_core.recall.filters import RecallFilters
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import QueryReading
from memory_core.vectors.api import VectorStore

if TYPE_CHECKING:
    from memory_core.recall.pool import Pool


@dataclass(frozen=True, slots=True)
class Hit:
    """A row one branch found."""

    id: int  # a memory's id, or an episode's (the two share one id space)
    score: float  # the branch's raw score, larger is better
    episode: bool = False
    turn: float | None = None  # a window hit: BM25 over the row's own text, from the same match
    names: tuple[str, ...] = ()  # an entity hit: the entities that carried it


@dataclass(frozen=True)
class Ranked:
    """One ranked list of a branch, best first."""

    name: str  # its key in Candidate.hits and Candidate.ranks
    hits: Sequence[Hit]
    cut: bool = False  # cut at its pool size: rows beyond its worst exist (its worst is a reference point)
    label: str | None = None  # the match_reason key showing a row's raw score from this list (None: not shown)


@dataclass(frozen=True)
class Ask:
    """What every branch searches with: one recall's query, filters and config, and the stores."""

    graph: GraphStore
    vectors: VectorStore
    filters: RecallFilters
    reading: QueryReading
    cfg: RecallConfig
    limit: int
    window: int  # recall.scan_window: no pool grows past it
    workers: Executor  # for a branch's own side search (the dated rows beside the vector query)
    diagnostics: dict[str, Any] = field(default_factory=dict)  # what a branch reports (RecallResult.diagnostics)
    embedding: Sequence[float] | None = None  # the query's, for the EMBEDDED branches


class Branch(Protocol):
    """A recall branch (a module of this package, see the module docstring)."""

    NAME: str
    EMBEDDED: bool

    def wanted(self, cfg: RecallConfig) -> bool:
        """Whether it runs under ``cfg``."""
        ...

    def search(self, ask: Ask) -> list[Ranked]:
        """Its lists, each best first, with the filters applied before any cut."""
        ...

    def fuse(self, pool: Pool) -> None:
        """Relative-score fusion: adds its weighted share to each row's ``base``."""
        ...

