"""memory-core's JSONL export format (version 1): one :class:`ExportLine` per memory, everything
needed to rebuild it. Written by :mod:`memory_core.operator.transfer`, read by
:mod:`memory_core.operator.jsonl_import`."""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from graph.api import AUTHORED_BY, IN_SESSION
from memory_core.entities.transfer import ExportEntity, ExportRelation
from memory_core.refs import MEMORY
from memory_core.write.request import AddItem

DERIVED_EDGES = frozenset({AUTHORED_BY, IN_SESSION})  # every add writes them; a line's edges list them too
STATE_FIELDS = ("supersedes", "superseded", "valid_to", "locked", "ended", "archived")
# written beside the add: its state, its edges, and its entities and relations as records with their refs
# (flags: what the poisoning scan found, scanned again on import under the importing tenant's policy)
NOT_ADDED = frozenset({"ref", "content_hash", "edges", "entities", "relations", "flags", *STATE_FIELDS})
MEMORY_REF = r"^mem:[1-9][0-9]{0,17}$"


class ExportEdge(BaseModel):
    """An edge leaving the memory: its kind and the node it points to."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    node: str


class ExportLine(BaseModel):
    """One memory in an export file (the JSONL line format, version 1)."""

    model_config = ConfigDict(extra="forbid")
    ref: str = Field(pattern=MEMORY_REF)
    tenant: str
    session: str
    agent: str
    type: str
    role: str | None = None
    channel: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    project_id: str | None = None
    salience: float
    visibility: str = "tenant"
    timestamp: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    content: str
    provenance: str = "import"  # where the content came from; a line without one (older exports) is an import
    flags: list[str] = Field(default_factory=list)  # the poisoning scan's findings when exported
    idempotency_key: str | None = None
    content_hash: str
    edges: list[ExportEdge] = Field(default_factory=list)
    entities: list[ExportEntity] = Field(default_factory=list)  # the entities it mentions
    relations: list[ExportRelation] = Field(default_factory=list)  # the RELATED edges it declared
    # versions and locks (update_memory, lock_memory): written with the row itself on import
    supersedes: str | None = Field(default=None, pattern=MEMORY_REF)
    superseded: bool = False  # derived from valid_to (kept so a line reads as recall shows it)
    valid_to: str | None = None
    locked: bool = False
    ended: dict[str, str | None] | None = None  # ended without a replacement: {reason, by} (with valid_to)
    # facts in time: add fields (when it became true, when to review it)
    valid_from: str | None = None
    review_after: str | None = None
    archived: str | None = None  # retention archived it then (imported archived: out of recall)

    def add_item(self) -> AddItem:
        """The add_memory arguments that rebuild this memory (its state, edges and entities go with it): every
        field but :data:`NOT_ADDED` (a test holds the rest equal to an add's fields)."""
        return cast(AddItem, self.model_dump(exclude=set(NOT_ADDED)))

    def has_state(self) -> bool:
        return (self.supersedes is not None or self.valid_to is not None or self.locked or self.ended is not None
                or self.archived is not None)

    def memory_edges(self) -> list[ExportEdge]:
        """Its edges to other memories, beyond the derived ones (SUPERSEDES of versions and handoffs, …)."""
        return [e for e in self.edges if e.kind not in DERIVED_EDGES and e.node.startswith(MEMORY + ":")]

    def links(self) -> set[str]:
        """The refs of the other memories of the file it points to (its version's predecessor, its edges)."""
        out = {e.node for e in self.memory_edges()}
        if self.supersedes is not None:
            out.add(self.supersedes)
        return out
