"""Entity reads and merges for :class:`memory_core.service.MemoryCore` (the CLI and MCP call these).

An entity is named by its ref (``ent:<id>``) or by any of its names and aliases (case- and
whitespace-insensitive). Reads take the viewer: an entity only private memories mention is
visible only to their author. A merge is one graph transaction (the graph is the only store an
entity lives in, so no journal intent is needed for a crash to leave all of it or none of it).
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from dataclasses import dataclass

from graph.api import EntityNode, EntityRecord, GraphStore
from memory_core import validation as v
from memory_core.entities.declared import KIND_PATTERN
from memory_core.errors import InvalidInputError, NotFoundError

ENTITY_REF = re.compile(r"^ent:([0-9]{1,18})$")
LIST_CAP = 1000
DEFAULT_LIST = 100  # a listing without a limit: the most mentioned, never every entity of the tenant


@dataclass(frozen=True, slots=True)
class MergedEntity:
    """The entity a merge kept, as stored (aliases of both), and the ref that is gone."""

    kept: EntityRecord
    merged_ref: str


class EntityService:
    def __init__(self, graph: GraphStore, write_lock: AbstractContextManager[object]) -> None:
        self.graph = graph
        self.lock = write_lock

    def resolve(self, tenant: str, name_or_ref: object, viewer: str | None) -> EntityNode:
        """The entity a ref or a name names, as the viewer sees it; NOT_FOUND otherwise."""
        if not isinstance(name_or_ref, str) or not name_or_ref.strip():
            raise InvalidInputError("An entity is named by its ref (ent:<id>) or a name.", field="entity")
        found = ENTITY_REF.match(name_or_ref.strip())
        node = (self.graph.entity(tenant, int(found.group(1)), viewer) if found
                else self.graph.entity_by_name(tenant, name_or_ref, viewer))
        if node is None:
            raise NotFoundError(f"No entity {name_or_ref!r} in this tenant.", entity=name_or_ref[:200])
        return node

    def list(self, tenant: str, viewer: str | None, *, kind: str | None = None,
             limit: int | None = None) -> list[EntityNode]:
        """The entities the viewer sees, most mentioned first (``DEFAULT_LIST`` without a limit)."""
        tenant = v.tenant(tenant)
        viewer = v.name(viewer, "viewer", required=False)
        if kind is not None and not KIND_PATTERN.match(kind):
            raise InvalidInputError(f"'kind' must match {KIND_PATTERN.pattern}.", field="kind")
        if limit is not None and not 1 <= limit <= LIST_CAP:
            raise InvalidInputError(f"'limit' must be 1..{LIST_CAP}.", field="limit")
        return self.graph.entities(tenant, viewer, kind=kind, limit=DEFAULT_LIST if limit is None else limit)

    def merge(self, tenant: str, keep: str, merge: str, *, viewer: str | None = None) -> MergedEntity:
        """Fold ``merge`` into ``keep``: its aliases, mentions and relations move, its ref is gone."""
        tenant = v.tenant(tenant)
        viewer = v.name(viewer, "viewer", required=False)
        with self.lock:
            kept, gone = self.resolve(tenant, keep, viewer), self.resolve(tenant, merge, viewer)
            if kept.id == gone.id:
                raise InvalidInputError(f"{keep!r} and {merge!r} are the same entity ({kept.ref}).", field="merge")
            with self.graph.transaction() as tx:
                if not tx.merge_entities(tenant, kept.id, gone.id):
                    raise NotFoundError("The entity changed under the merge; list the entities again.",
                                        entity=gone.ref)
        record = next(r for r in self.graph.entity_records(tenant) if r.id == kept.id)
        return MergedEntity(record, gone.ref)
