"""Entities in export files: each memory line carries the entities it mentions (whole records:
ref, name, kind, aliases) and the relations it declared, so every line stands alone.

On import (in the transaction that writes each memory) an entity keeps its ref when the tenant
holds the same entity under it, joins the tenant's entity that already answers to one of its
names, or is written under its ref (a fresh one if that id is taken or past MAX_KEPT_ID); its
aliases nobody holds are added. Mentions and relations are then written between the stored
refs; a memory already present is skipped whole, so a re-import writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graph.api import SHARED_VIEW, EntityRecord, EntityRelation, GraphStore, GraphTxn, MemoryNode, entity_norm
from memory_core.entities import declared
from memory_core.refs import MAX_KEPT_ID

ENTITY_REF = r"^ent:[1-9][0-9]{0,17}$"


class ExportEntity(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ref: str = Field(pattern=ENTITY_REF)
    name: str
    kind: str | None = None
    aliases: list[str] = Field(default_factory=list)
    created_us: int = 0

    def check(self) -> None:
        """The declaration rules of add_memory (INVALID_INPUT naming the field)."""
        declared.entities([{"name": self.name, "kind": self.kind, "aliases": self.aliases[:declared.MAX_ALIASES]}])


class ExportRelation(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    src: str = Field(alias="from", pattern=ENTITY_REF)
    dst: str = Field(alias="to", pattern=ENTITY_REF)
    label: str = Field(min_length=1, max_length=64)


@dataclass
class EntityExporter:
    """The tenant's entity records and relations, read once per export."""

    records: dict[int, EntityRecord]
    relations: dict[int, list[EntityRelation]]
    views: dict[str, frozenset[str]]

    @classmethod
    def of(cls, graph: GraphStore, tenant: str) -> EntityExporter:
        by_mem: dict[int, list[EntityRelation]] = {}
        for rel in graph.all_relations(tenant):
            by_mem.setdefault(rel.mem_id, []).append(rel)
        return cls({r.id: r for r in graph.entity_records(tenant)}, by_mem, graph.alias_views(tenant))

    def _entity(self, record: EntityRecord, memory: MemoryNode | None) -> ExportEntity:
        """The entity as the line's memory's readers may see it: a shared line carries no alias only
        private memories declared (so an import keeps them private); first visible name first."""
        readers = {SHARED_VIEW} if memory is None or memory.visibility == "tenant" else {SHARED_VIEW, memory.agent}
        names = [a for a in record.aliases if self.views.get(entity_norm(a), frozenset()) & readers]
        names = names or [record.name]
        return ExportEntity(ref=f"ent:{record.id}", name=names[0], kind=record.kind, aliases=names,
                            created_us=record.created_us)

    def fields(self, graph: GraphStore, tenant: str, ids: Sequence[int],
               memories: Mapping[int, MemoryNode]) -> dict[int, dict[str, Any]]:
        """The ``entities`` and ``relations`` fields of each memory line."""
        out: dict[int, dict[str, Any]] = {}
        for mem_id, entity_ids in graph.memory_entities(tenant, ids).items():
            out[mem_id] = {"entities": [self._entity(r, memories.get(mem_id))
                                        for r in (self.records.get(i) for i in entity_ids) if r is not None]}
        for mem_id in ids:
            rels = self.relations.get(mem_id)
            if rels:
                out.setdefault(mem_id, {"entities": []})["relations"] = [
                    ExportRelation(src=f"ent:{r.src}", dst=f"ent:{r.dst}", label=r.label) for r in rels]
        return out


@dataclass
class EntityImportCounts:
    entities: int = 0
    mentions: int = 0
    relations: int = 0


@dataclass
class EntityRestore:
    """The entities an import has resolved so far: ``held`` (normalised name -> entity id, read from
    the tenant before the import's first write and grown as it writes) and ``mapped`` (entity ref in
    the file -> the stored id). :meth:`write` works on a copy (:meth:`attempt`), kept only once the
    transaction it ran in has committed (:meth:`keep`)."""

    held: dict[str, int]
    mapped: dict[str, int]

    @classmethod
    def of(cls, graph: GraphStore, tenant: str) -> EntityRestore:
        records = graph.entity_records(tenant)
        return cls({entity_norm(a): r.id for r in records for a in (r.name, *r.aliases)}, {})

    def attempt(self) -> EntityRestore:
        return EntityRestore(dict(self.held), dict(self.mapped))

    def keep(self, attempt: EntityRestore) -> None:
        self.held, self.mapped = attempt.held, attempt.mapped

    def write(self, tx: GraphTxn, tenant: str,
              items: Sequence[tuple[int, list[ExportEntity], list[ExportRelation]]]) -> EntityImportCounts:
        """Inside the transaction that wrote the memories ``items`` name (stored id, entities, relations):
        their entities (each keeps its ref when the tenant holds the same entity under it, joins the
        entity that answers to one of its names, or is written under its ref when that id is free
        and at most MAX_KEPT_ID, else under a fresh one), mentions, alias views and relations."""
        counts = EntityImportCounts()
        for _mem, ents, _rels in items:
            for ent in ents:
                if ent.ref in self.mapped:
                    continue
                norms = [entity_norm(n) for n in (ent.name, *ent.aliases)]
                file_id = int(ent.ref[4:])
                target = file_id if self.held.get(norms[0]) == file_id else next(
                    (self.held[n] for n in norms if n in self.held), None)
                if target is None:
                    keep = file_id <= MAX_KEPT_ID and not tx.id_in_use(file_id)
                    target = file_id if keep else tx.allocate_ids(1)[0]
                    tx.reserve_ids_through(target)
                record = EntityRecord(target, ent.name, ent.kind, tuple(ent.aliases), ent.created_us)
                counts.entities += tx.restore_entity(tenant, record)
                for n in norms:
                    self.held.setdefault(n, target)
                self.mapped[ent.ref] = target
        for mem_id, ents, rels in items:
            counts.mentions += tx.restore_mentions(tenant, mem_id, [self.mapped[e.ref] for e in ents])
            tx.restore_alias_views(tenant, mem_id, [n for e in ents for n in (e.name, *e.aliases)])
            counts.relations += tx.restore_relations(tenant, [
                EntityRelation(self.mapped[r.src], self.mapped[r.dst], r.label, mem_id) for r in rels
                if r.src in self.mapped and r.dst in self.mapped])
        return counts
