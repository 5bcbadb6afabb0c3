"""The graph store's seam: what ``memory_core`` may ask of the durable graph, and nothing else.

A backend (:mod:`graph.sqlite.store` over one SQLite file; a PostgreSQL one for replicas)
implements :class:`GraphStore`. Every read takes the tenant and returns frozen values
(:class:`MemoryNode`, :class:`EpisodeNode`, ...): another tenant's node reads exactly like
a missing one, and no caller can change the store by changing what it was given. Backends
lock internally and raise :class:`GraphStoreError` (decided from SQLite result codes or
PostgreSQL SQLSTATEs, never message text), which ``memory_core.store_errors`` maps once.

Writes happen inside ``with store.transaction() as tx:`` (:class:`GraphTxn`): all of it
commits or none of it does, and the store's own caches follow the commit.

Node ids: ``mem:<id>`` (AGENT_MEMORY), ``ep:<id>`` (EPISODE), ``agent:<tenant>/<agent>``
(AGENT), ``session:<tenant>/<session>`` (SESSION), ``ent:<id>`` (ENTITY). Edges: AUTHORED_BY and
IN_SESSION from every memory; SUMMARIZES from an episode to its session; SUPERSEDES from a
handoff to the one it replaces, and from a memory's new version (``update_memory``) to the
version it corrects (the new row's ``supersedes_id`` names it; the old row's ``valid_to_us``
ends it); MENTIONS from a memory to an entity; RELATED (with a label) from an entity to
another, declared by a memory.

Entities live in their own tables (not the generic node/edge rows): their names and aliases
resolve by :func:`entity_norm` (NFC, case-folded, whitespace collapsed), one entity per
normalised alias and reader: a name only an agent's private memories declared is that agent's
alone, and another agent declaring it gets an entity of its own (:mod:`graph.entity_link`).
Each MENTIONS and RELATED row carries the visibility of the memory that wrote it, so an entity
(or relation) seen only in an agent's private memories is visible only to that agent: entity
reads take the ``viewer``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal, Protocol

from graph.agent_names import AgentNameIndex as AgentNameIndex
from graph.entity_values import SHARED_VIEW as SHARED_VIEW
from graph.entity_values import EntityNode as EntityNode
from graph.entity_values import EntityRecord as EntityRecord
from graph.entity_values import EntityRelation as EntityRelation
from graph.entity_values import EntitySpec as EntitySpec
from graph.entity_values import RelationSpec as RelationSpec
from graph.entity_values import ent_node as ent_node
from graph.entity_values import entity_node as entity_node
from graph.entity_values import entity_norm as entity_norm
from graph.entity_values import name_keys as name_keys
from graph.entity_values import resolve_key as resolve_key
from graph.errors import ErrorKind as ErrorKind
from graph.errors import GraphStoreError as GraphStoreError

if TYPE_CHECKING:  # networkx is imported only by what traverses
    import networkx as nx

AGENT_MEMORY = "AGENT_MEMORY"
AGENT = "AGENT"
SESSION = "SESSION"
EPISODE = "EPISODE"
AUTHORED_BY = "AUTHORED_BY"
IN_SESSION = "IN_SESSION"
SUMMARIZES = "SUMMARIZES"
SUPERSEDES = "SUPERSEDES"

Key = tuple[int, int]  # (timestamp in µs, id): the order of a session, a tenant, a page

INDEXED_FIELDS = ("type", "agent", "channel")
# what GraphTxn.set_memory_state sets: versions, locks, an end without a replacement (end_memory), archiving
MEMORY_STATE_FIELDS = ("supersedes_id", "valid_to_us", "locked", "end_reason", "ended_by", "archived_us")
# what GraphTxn.rewrite_memory may replace (doctor: secrets stored before the guard, redacted in place)
REWRITE_FIELDS = ("content", "content_len", "content_hash", "metadata", "source", "source_id")


def agent_node(tenant: str, agent: str) -> str:
    return f"agent:{tenant}/{agent}"


def session_node(tenant: str, session: str) -> str:
    return f"session:{tenant}/{session}"


def mem_node(mem_id: int) -> str:
    return f"mem:{mem_id}"


def ep_node(ep_id: int) -> str:
    return f"ep:{ep_id}"


@dataclass(frozen=True, slots=True)
class MemoryNode:
    """An AGENT_MEMORY node's attributes (everything but the content)."""

    id: int
    tenant: str
    session: str
    agent: str
    type: str
    role: str | None
    channel: str | None
    source: Mapping[str, Any]
    source_id: str | None
    project_id: str | None
    salience: float
    visibility: str
    ts_us: int
    metadata: Mapping[str, Any]
    content_len: int
    content_hash: str
    supersedes_id: int | None = None  # the version this one corrects (update_memory); None for handoffs
    valid_to_us: int | None = None  # set when a newer version superseded this one (its time), or it was ended
    locked: bool = False  # lock_memory: no update or delete until unlocked
    valid_from_us: int | None = None  # when it became true, if the writer said (None: its timestamp)
    review_after_us: int | None = None  # when it should be checked again (recall marks it review_due after)
    end_reason: str | None = None  # ended without a replacement (end_memory): why; None for a correction
    ended_by: str | None = None  # who ended it (end_memory), when it was ended without a replacement
    archived_us: int | None = None  # retention archived it then: out of recall and the vector index, restorable
    provenance: str = "agent"  # where the content came from: user, agent, tool, web, import, hook
    flags: tuple[str, ...] = ()  # what the poisoning scan found (memory_core.write.poisoning.FLAGS), sorted
    kind: str = AGENT_MEMORY

    @property
    def current(self) -> bool:
        """Not superseded by a newer version nor ended (recall's default view)."""
        return self.valid_to_us is None

    @property
    def valid_since_us(self) -> int:
        """When it became valid: ``valid_from_us`` when the writer gave one, else its timestamp."""
        return self.ts_us if self.valid_from_us is None else self.valid_from_us

    def valid_at(self, at_us: int) -> bool:
        """Valid at the instant ``at_us``: begun by then, not ended by then (``as_of`` reads)."""
        return self.valid_since_us <= at_us and (self.valid_to_us is None or self.valid_to_us > at_us)

    @property
    def key(self) -> Key:
        return (self.ts_us, self.id)


# The columns of a memory row: its node's (every field of MemoryNode but ``kind``), its content and its
# idempotency key. Both backends read and write exactly these (graph/sqlite/rows.py, graph/pg/rows.py).
MEMORY_NODE_COLUMNS = tuple(f.name for f in fields(MemoryNode) if f.name != "kind")
MEMORY_COLUMNS = (*MEMORY_NODE_COLUMNS, "content", "idempotency_key")


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    """A memory row whole: its node, its content and its (scoped, see ``memory_core.write.rows``)
    idempotency key. The write path validates an add into one (``memory_core.write.add_rows``) and
    :meth:`GraphTxn.write_memory` stores it; maintenance reads them back (``memory_rows``)."""

    node: MemoryNode
    content: str
    idempotency_key: str | None = None

    def as_row(self) -> dict[str, Any]:
        """Every column by name, source and metadata as plain dicts (doctor checks and repairs rows as dicts)."""
        row = {name: getattr(self.node, name) for name in MEMORY_NODE_COLUMNS}
        row.update(source=dict(self.node.source), metadata=dict(self.node.metadata), content=self.content,
                   idempotency_key=self.idempotency_key)
        return row

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> MemoryRecord:
        """The record of :meth:`as_row`'s dict (a column missing from ``row`` takes its node default)."""
        node = MemoryNode(**{name: row[name] for name in MEMORY_NODE_COLUMNS if name in row})
        return cls(node, row["content"], row.get("idempotency_key"))


@dataclass(frozen=True, slots=True)
class EpisodeNode:
    """An EPISODE node: a session's summary."""

    id: int
    tenant: str
    session: str
    summary: str
    summary_source: str
    summary_error: str | None
    first_id: int | None
    last_id: int | None
    turn_count: int
    last_ts_us: int | None
    handoff_id: int | None
    created_us: int
    updated_us: int
    kind: str = EPISODE


@dataclass(frozen=True, slots=True)
class EdgeRef:
    """One edge seen from a node: its direction, kind and the node at the other end."""

    direction: Literal["in", "out"]
    kind: str
    other: str


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """An intent written before a multi-store change (``add``, ``restore``, ``delete``, ``episode``)."""

    seq: int
    op: str
    tenant: str
    item_id: str  # a ref: mem:<id> or ep:<id>
    created_us: int


@dataclass(frozen=True, slots=True)
class SessionStats:
    session: str
    memories: int
    turns: int
    first: Key | None
    last: Key | None


@dataclass(frozen=True)
class RowFilter:
    """Row filters a backend evaluates inside its own queries (lexical search, id listings).

    ``project``: None = any project; "" = the global pool only; a name = that project or
    the global pool. ``viewer`` sees shared rows and its own private ones. Archived rows (retention,
    consolidation's merged members) never match: they are out of recall and would take its places.
    """

    tenant: str
    viewer: str | None = None
    type: str | None = None
    session: str | None = None
    agent: str | None = None
    channel: str | None = None
    source_prefix: str | None = None
    project: str | None = None

    @property
    def selective(self) -> bool:
        return bool(self.type or self.session or self.agent or self.channel or self.source_prefix
                    or self.project is not None)


@dataclass(frozen=True, slots=True)
class LexicalHit:
    id: int
    score: float  # larger is better (negated bm25)
    turn: float = 0.0  # window hits: the score of the memory's own text alone (0 if only its predecessor matched)


class GraphTxn(Protocol):
    """One write transaction. A memory is written as a :class:`MemoryRecord`; an episode as a dict of
    the columns of :class:`EpisodeNode`."""

    def allocate_ids(self, n: int) -> list[int]: ...
    def reserve_ids_through(self, item_id: int) -> None: ...
    def id_in_use(self, item_id: int) -> bool: ...
    def journal(self, entries: Iterable[tuple[str, str, str]]) -> None:
        """Write (op, tenant, item ref) intents."""
    def clear_journal(self, op: str, refs: Iterable[str]) -> int:
        """Clear this writer's intents for ``refs``; returns how many it cleared (an intent another
        replica took over, its lease having lapsed, is that replica's now and stays)."""
    def clear_journal_seqs(self, seqs: Iterable[int]) -> None: ...
    def lock_memories(self, rows: Sequence[MemoryRecord]) -> None:
        """Before writing several memories in one transaction: take the locks their writes need in one
        global order (a backend shared by replicas), so two such transactions never deadlock."""
    def duplicate_of(self, row: MemoryRecord, window_us: int, corrects: int | None = None) -> int | None:
        """The newest same-content memory of the session within the window that the writer can read.
        Only current versions count, and never ``corrects``, the version ``row`` supersedes: a new
        version of a row (or a return to an older text of its chain) is not a repeat of it."""
    def write_memory(self, row: MemoryRecord) -> None:
        """Insert the memory (with an id no row holds), its AGENT and SESSION nodes, both edges, its
        lexical index and window rows and its counts."""
    def erase_memory(self, tenant: str, mem_id: int) -> bool: ...
    def supersede_memory(self, tenant: str, mem_id: int, valid_to_us: int) -> bool:
        """End a current, unlocked memory's validity at ``valid_to_us``; False (nothing written)
        when it is missing, foreign, already superseded or locked."""
    def end_memory(self, tenant: str, mem_id: int, valid_to_us: int | None, reason: str | None,
                   by: str | None) -> bool:
        """End a current, unlocked memory without a replacement (``reason`` and ``by`` kept), or with
        ``valid_to_us`` None revive one so ended; False (nothing written) when it is missing, foreign,
        locked, or not in the state the change starts from (the guard is in the UPDATE, as for
        :meth:`supersede_memory`: a correction or an end by another replica wins)."""
    def set_memory_state(self, tenant: str, mem_id: int, state: Mapping[str, Any]) -> bool:
        """Set any of ``locked``, ``valid_to_us``, ``supersedes_id`` (locks, imports, repairs);
        False when the tenant has no such memory."""
    def rewrite_memory(self, tenant: str, mem_id: int, changes: Mapping[str, Any]) -> bool:
        """Replace any of REWRITE_FIELDS of a stored memory in place (doctor's redaction of secrets
        stored before the guard); its lexical index and window rows follow, and so does the window of
        the next row of its session when this one lends it its words. False when the tenant has no
        such memory."""
    def write_edge(self, tenant: str, src: str, dst: str, kind: str) -> None: ...
    def erase_edges(self, edges: Iterable[tuple[str, str, str]]) -> None: ...
    def write_episode(self, row: Mapping[str, Any]) -> None: ...
    def set_meta(self, key: str, value: str, *, overwrite: bool) -> None: ...
    def rebuild_counts(self) -> None:
        """Recount every tenant's rows (doctor's repair of counts that disagree with them)."""

    # ---- entities (the memory row must be written first in the same transaction) ------------
    def link_entities(self, tenant: str, mem_id: int, entities: Sequence[EntitySpec],
                      relations: Sequence[RelationSpec], now_us: int) -> list[int]:
        """Resolve each declared entity (and each relation end) by its normalised name or an
        alias as the memory's author may read it (:mod:`graph.entity_link`), creating the ones not
        known yet; add new aliases (an alias another entity holds is left to it); write MENTIONS
        from the memory to each and its RELATED edges. Returns the entity ids the memory mentions,
        in declaration order, without repeats."""
    def lookup_keys(self, tenant: str, keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
        """For each alias key found: the entity holding it and who may read it (see
        :mod:`graph.entity_link`; import resolves names as a line's author would)."""
    def rekey_private(self, tenant: str, norm: str) -> None:
        """Move a plain alias key no shared memory declared to its readers' private keys (see
        :meth:`graph.entity_link.EntityRows.rekey_private`)."""
    def merge_entities(self, tenant: str, keep: int, merge: int) -> bool:
        """Move ``merge``'s aliases, mentions and relations onto ``keep`` and remove ``merge``
        (False when either is not the tenant's, or they are the same entity)."""
    def restore_entity(self, tenant: str, record: EntityRecord) -> bool:
        """Import: write the entity with its id and aliases; True when it is new. When the tenant
        has that id already, only the record's aliases nobody holds are added (and its kind if it
        has none); another tenant's id is left alone. An alias another entity holds stays with it."""
    def restore_mentions(self, tenant: str, mem_id: int, entity_ids: Sequence[int]) -> int:
        """Import: MENTIONS from a stored memory to stored entities; returns how many were new."""
    def restore_relations(self, tenant: str, relations: Sequence[EntityRelation]) -> int:
        """Import: RELATED edges between stored entities, declared by stored memories; new ones counted."""
    def restore_alias_views(self, tenant: str, mem_id: int, names: Sequence[str]) -> None:
        """Import: these names were declared by this stored memory, so whoever may read it may read
        them (see :meth:`GraphStore.alias_views`)."""
    def erase_entity_links(self, tenant: str, mentions: Sequence[tuple[int, int]],
                           relations: Sequence[EntityRelation]) -> int:
        """Doctor: delete these (memory id, entity id) MENTIONS and these RELATED rows; how many existed."""
    def erase_entity(self, tenant: str, entity_id: int) -> bool:
        """Doctor: remove the entity whole (its name, aliases and who saw them, its MENTIONS and its
        RELATED edges either way): an entity named by a secret stored before the guard. False when
        the tenant has no such entity."""


class MemoryRows(Protocol):
    """A tenant's memories by id or idempotency key."""

    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None: ...
    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        """The tenant's memories among ``ids`` (absent and foreign ids are left out)."""
    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]: ...
    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None: ...
    def memory_ids(self, tenant: str) -> list[int]:
        """Every memory id of the tenant, newest first (scans: doctor, exports, tests)."""
    def review_due(self, tenant: str, now_us: int, limit: int) -> list[MemoryNode]:
        """The tenant's current memories whose ``review_after_us`` is at or before ``now_us``, the longest due
        first (the inspector's review list); at most ``limit``."""


class EpisodeRows(Protocol):
    """A tenant's episodes (session summaries)."""

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None: ...
    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None: ...
    def episodes(self, tenant: str) -> list[EpisodeNode]: ...


class Timeline(Protocol):
    """Memories in (timestamp, id) order: pages, neighbours in a session, bounds."""

    def page(self, tenant: str, session: str | None, before: Key | None, limit: int, *,
             turns_only: bool = False) -> list[Key]:
        """Keys strictly older than ``before`` (or the newest), newest first; ``session`` None
        pages the whole tenant."""
    def iter_newest(self, tenant: str, session: str | None, before: Key | None = None, *,
                    turns_only: bool = False) -> Iterator[Key]:
        """:meth:`page` continued lazily, for callers that filter as they go."""
    def adjacent(self, tenant: str, session: str, key: Key, *, forward: bool,
                 turns_only: bool = False) -> Key | None: ...
    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        """(previous, next) in its session for each of the tenant's memories."""
    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None: ...


class Counts(Protocol):
    """Counts the store keeps as it writes: never a scan of the rows."""

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int: ...
    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        """Memories per UTC day (day number = ts_us // 86_400_000_000), ``days`` days from ``first_day``."""
    def sessions(self, tenant: str) -> list[SessionStats]: ...
    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        """How many of the session's memories are private to an agent other than ``viewer``."""
    def non_turn_count(self, tenant: str) -> int: ...
    def private_count(self, tenant: str) -> int:
        """How many of the tenant's memories are private to their author."""


class FieldIndex(Protocol):
    """Memories by an indexed field (type, agent, channel) or a source-id prefix."""

    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        """Memory ids whose ``field`` (one of INDEXED_FIELDS) equals ``value``, newest first."""
    def field_count(self, tenant: str, field: str, value: str) -> int: ...
    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        """Memories per value of ``field`` (one of INDEXED_FIELDS)."""
    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]: ...
    def source_prefix_count(self, tenant: str, prefix: str) -> int: ...
    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        """Sessions holding a *shared* memory written in ``channel``."""
    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool: ...


class EdgeIndex(Protocol):
    """Edges of a node, supersession, and k-hop neighbourhoods."""

    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]: ...
    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """For each memory id, the memories that SUPERSEDE it."""
    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int,
                      hub_degree: int, children: int = 8) -> nx.MultiDiGraph:
        """The k-hop subgraph around ``node`` (see :mod:`graph.traversal`), with node
        attributes; cached and evicted by the store (read it, never change it)."""


class EntityIndex(Protocol):
    """Entities and their mentions and relations (viewer: an agent sees shared mentions and its own private ones)."""

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        """The entity when the viewer can see a memory that mentions it."""
    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        """The name :meth:`entity` gives each entity the viewer sees (absent: the others), in one read."""
    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        """The entity a name or alias resolves to for the viewer (see :func:`entity_norm`; a name
        the viewer may not read resolves to nothing), if the viewer sees it."""
    def entity_ids(self, tenant: str, names: Sequence[str], viewer: str | None = None) -> dict[str, int]:
        """The entity each name or alias resolves to for the viewer (None: shared names only), keyed
        by the name as given (names that resolve to none are absent). Ids only, no mention count
        (one indexed read for all the names; recall's entity branch): what is read next takes the viewer."""
    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        """The entities the viewer sees, most mentioned first (then by name)."""
    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        """For each entity, the ids of the memories the viewer sees that mention it, newest first
        (at most ``limit`` each)."""
    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        """For each entity, how many memories the viewer sees mention it, counted up to ``cap``
        (an index count: a hub entity costs ``cap`` index entries, no rows)."""
    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        """For each of the tenant's memories, the entities it mentions (whoever reads the memory
        may see them; the caller checks the memory's visibility)."""
    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        """RELATED edges with either end among ``entity_ids`` declared by memories the viewer sees."""
    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        """Every entity of the tenant (or those among ``ids``), by id (export, the operator's
        inspector; not viewer-filtered)."""
    def alias_views(self, tenant: str) -> dict[tuple[int, str], frozenset[str]]:
        """Export: for each (entity id, normalised alias), who may read it: ``''`` (a shared memory
        declared it) and/or the agents whose private memories did."""
    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        """Every (memory id, entity id) MENTIONS row of the tenant (export, doctor)."""
    def all_relations(self, tenant: str) -> list[EntityRelation]:
        """Every RELATED row of the tenant (export, doctor)."""


class TenantIndex(Protocol):
    """The tenants, and each tenant's agents."""

    def tenants(self) -> list[str]: ...
    def agents(self, tenant: str) -> frozenset[str]: ...
    def agent_names(self, tenant: str) -> AgentNameIndex: ...


class LexicalSearch(Protocol):
    """BM25 and phrase search in one tenant, filters pushed down."""

    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *, own: bool = False) -> list[LexicalHit]:
        """BM25 over each memory's window (its text + the previous shared memory of its session)."""
    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        """``lexical_window`` ranked by the window and by the own text, from one search where the backend can."""
    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        """Exact phrases in each memory's own text."""


class Journal(Protocol):
    """The write-ahead intents that crash recovery replays (shared between replicas on PostgreSQL)."""

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries this process may act on (on a shared store: its own and those of dead replicas)."""
    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        """Take entries over before recovering them; returns the seqs this process now owns (on a
        shared store, two recovering replicas never both get one)."""
    def journal_size(self) -> int:
        """Every pending entry, whoever owns it."""


class StoreLifecycle(Protocol):
    """Meta values, transactions, versions for caches, and closing."""

    def meta(self, key: str) -> str | None: ...
    def transaction(self) -> AbstractContextManager[GraphTxn]: ...
    def version(self, tenant: str) -> int:
        """A number that changes whenever the tenant's graph changes (cache keys)."""
    def consistent_reads(self, tenant: str) -> AbstractContextManager[None]:
        """One request's reads of ``tenant`` (this thread, inside the block): everything committed
        before the block began, on any replica, is visible, and the reads may share one check of
        the tenant's version; a write through this store inside the block is visible after it."""
    def invalidate(self) -> None:
        """Drop every cache (after a repair rewrote rows underneath)."""
    def close(self) -> None: ...


class GraphStore(MemoryRows, EpisodeRows, Timeline, Counts, FieldIndex, EdgeIndex, EntityIndex, TenantIndex,
                 LexicalSearch, Journal, StoreLifecycle, Protocol):
    """The durable graph, read by tenant and written in transactions: every concern above, in one store.

    Code that needs one concern takes its narrow Protocol (recall's lexical branch a
    :class:`LexicalSearch`, the entity walk an :class:`EntityIndex`); the service holds the whole store.
    """


def _plain(value: Any) -> dict[str, Any]:
    return {f.name: getattr(value, f.name) for f in fields(value)}


def node_attrs(store: GraphStore, tenant: str, node: str) -> dict[str, Any] | None:
    """A node's attributes (with ``kind``), or None when it is absent or another tenant's."""
    kind, _, rest = node.partition(":")
    if kind == "mem" and rest.isdigit():
        mem = store.memory(tenant, int(rest))
        return None if mem is None else {**_plain(mem), "source": dict(mem.source), "metadata": dict(mem.metadata)}
    if kind == "ep" and rest.isdigit():
        ep = store.episode(tenant, int(rest))
        return None if ep is None else _plain(ep)
    prefix = f"{kind}:{tenant}/"
    if kind == "agent" and node.startswith(prefix) and (name := node[len(prefix):]) in store.agents(tenant):
        return {"kind": AGENT, "tenant": tenant, "agent": name}
    if kind == "session" and node.startswith(prefix) and store.count(tenant, node[len(prefix):]) > 0:
        return {"kind": SESSION, "tenant": tenant, "session": node[len(prefix):]}
    return None
