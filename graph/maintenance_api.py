"""The graph store's maintenance seam: what doctor, export/import and the operator views ask of
the durable graph besides the request-path reads of :class:`graph.api.GraphStore`.

These are operator-wide scans (every tenant, every row), consistency checks of the store's
own derived indexes (each tenant's lexical index and window) and their rebuilds, and the
small repairs doctor makes (missing AGENT/SESSION nodes and derived edges, dangling edges).
Everything returns frozen values; a backend locks internally and raises
:class:`graph.api.GraphStoreError` (by result code, never message text). Callers that need
several calls to see one state hold their own writer lock across them (doctor does).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from graph.api import EpisodeNode, JournalEntry, MemoryRecord


@dataclass(frozen=True, slots=True)
class NodeRow:
    """A stored graph node other than a memory or an episode (AGENT, SESSION)."""

    node_id: str
    kind: str
    tenant: str
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EdgeRow:
    src: str
    dst: str
    kind: str
    tenant: str


@dataclass(frozen=True, slots=True)
class MissingStructure:
    """A derived row a memory needs and lacks: its AGENT/SESSION node, or its AUTHORED_BY/IN_SESSION edge
    (exactly one of ``node`` and ``edge`` is set); ``ref`` is the memory (``mem:<id>``)."""

    tenant: str
    ref: str
    node: NodeRow | None = None
    edge: EdgeRow | None = None


@dataclass(frozen=True, slots=True)
class DanglingEdge:
    """An edge whose end does not exist, or belongs to another tenant than the edge."""

    edge: EdgeRow
    end: str  # the end that is missing or foreign
    foreign: bool  # True: ``end`` exists in another tenant; False: it does not exist


@dataclass(frozen=True, slots=True)
class LexicalState:
    """The tenant's lexical index compared with the content of its memories.

    ``index``: "ok"; "missing" (the tenant has none); "foreign" (the index registered for the
    tenant is not the tenant's own, ``name`` says which). ``indexed``: documents the index
    holds; ``differing``: documents whose indexed terms differ from the stored content.
    """

    index: Literal["ok", "missing", "foreign"]
    name: str | None
    indexed: frozenset[int] = frozenset()
    differing: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class WindowState:
    """The tenant's lexical window (each memory's text + its shared predecessor's) against its
    exact expected content. ``present`` False: there is no window table (``missing`` then holds
    every memory that should be in it). ``damaged``: the index failed its integrity check."""

    present: bool
    extra: frozenset[int] = frozenset()  # rows with no memory of the tenant
    missing: frozenset[int] = frozenset()  # memories without a row
    differing: frozenset[int] = frozenset()  # rows whose text differs from the expected window
    damaged: str | None = None


@dataclass(frozen=True, slots=True)
class IdSpace:
    """The shared id sequence (memories, episodes and entities draw from it) against a limit.

    ``next_id``: the id the sequence hands out next. ``largest``: the largest id at or below the
    limit that a memory, an episode, an entity or a pending journal entry holds (None: none).
    ``beyond``: (kind, tenant, id) of the rows whose id is past the limit (kind: memory, episode,
    entity), at most a few hundred."""

    next_id: int
    largest: int | None
    beyond: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class DiskUse:
    """Bytes the graph store takes (None: not a local file, or absent)."""

    database: int | None
    wal: int | None


class GraphMaintenance(Protocol):
    """Scans, checks and repairs of the durable graph (operator-wide unless a tenant is named)."""

    # ---- tenants and memory rows -------------------------------------------------------------
    def tenants_present(self) -> list[str]:
        """Every tenant named by any row of the store (memories, nodes, edges, episodes, journal,
        lexical indexes): a leak into one table still shows up."""
    def memory_rows(self, tenant: str, ids: Iterable[int] | None = None) -> list[MemoryRecord]:
        """The tenant's memories (all, or those among ``ids``) with their content, by id."""
    def existing_memory(self, tenant: str, session: str, content_hash: str, ts_us: int) -> int | None:
        """The lowest id of the tenant's memory with this session, content hash and timestamp."""
    def restored_from(self, tenant: str, content_hash: str, origin: str) -> int | None:
        """The lowest id of the tenant's memory with this content whose metadata says
        ``restored_from: origin`` (a doctor restore under a new ref)."""
    def idempotency_keys(self, tenant: str, ids: Iterable[int]) -> dict[int, str | None]:
        """Stored (scoped) idempotency keys of the tenant's memories among ``ids``."""
    def id_in_use(self, item_id: int) -> bool:
        """True when a memory, an episode, an entity or a pending journal entry holds this id."""
    def id_space(self, limit: int) -> IdSpace:
        """Where the shared id sequence stands against ``limit`` (the largest id a ref can name)."""
    def reset_id_sequence(self, next_id: int) -> None:
        """Doctor: make ``next_id`` the next id the sequence hands out (only ever to bring back a
        sequence moved past the nameable range; the caller checked no id at or above it is held)."""

    # ---- episodes, journal --------------------------------------------------------------------
    def episode_ids(self, tenant: str) -> list[int]: ...
    def episodes(self, tenant: str) -> list[EpisodeNode]: ...
    def stale_counts(self) -> dict[str, list[str]]:
        """Per tenant, the kept counts that disagree with a recount from the rows (one line each)."""
    def journal(self) -> list[JournalEntry]:
        """Every pending journal entry, oldest first."""

    # ---- lexical indexes ----------------------------------------------------------------------
    def lexical_state(self, tenant: str) -> LexicalState: ...
    def window_state(self, tenant: str) -> WindowState: ...
    def rebuild_lexical(self, tenant: str) -> None:
        """Re-index the tenant's own rows in its lexical index and window (all or nothing)."""
    def purge_rewritten(self, tenants: Iterable[str]) -> bool:
        """After rows were rewritten to remove secrets: drop the old text the files may still hold
        (index segments, freed pages, the write-ahead log). True when the backend did; False when it
        cannot from here (the operator's step is in docs/secrets.md)."""

    # ---- nodes and edges ----------------------------------------------------------------------
    def nodes(self) -> list[NodeRow]: ...
    def edges(self) -> list[EdgeRow]: ...
    def missing_structure(self) -> list[MissingStructure]:
        """Derived nodes and edges absent for existing memories (each missing node once)."""
    def create_structure(self, items: Iterable[MissingStructure]) -> None:
        """Write the given nodes and edges (present ones are left as they are), in one transaction."""
    def dangling_edges(self) -> list[DanglingEdge]:
        """Edges whose source or target does not exist, or lives in another tenant. A memory's own
        AGENT/SESSION node counts as existing even when its row is lost (:meth:`create_structure`
        brings it back)."""
    def remove_edges(self, edges: Iterable[EdgeRow]) -> int:
        """Delete these edges in one transaction; how many existed."""

    # ---- operator views -----------------------------------------------------------------------
    def disk_use(self) -> DiskUse: ...
    def content_chars(self) -> dict[str, int]:
        """Characters of content stored per tenant (operator-wide; for the inspector's sizes). Read
        without waiting for the service's writes."""


__all__ = [
    "DanglingEdge", "DiskUse", "EdgeRow", "GraphMaintenance", "IdSpace", "LexicalState", "MissingStructure", "NodeRow",
    "WindowState",
]
