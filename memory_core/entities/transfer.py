"""Entities in export files: each memory line carries the entities it mentions (whole records:
ref, name, kind, aliases) and the relations it declared, so every line stands alone.

On import (after the memories are in) an entity keeps its ref when the tenant holds the same
entity under it, joins the tenant's entity that already answers to one of its names, or is
written under its ref (a fresh one if that id is taken); its aliases nobody holds are added.
Mentions and relations are then written between the stored refs; what is there already is
not written again, so a re-import writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from graph.api import SHARED_VIEW, EntityRecord, EntityRelation, GraphStore, MemoryNode, entity_norm
from memory_core.entities import declared
from memory_core.refs import parse_ref

if TYPE_CHECKING:
    from memory_core.service import MemoryCore

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


def restore(core: MemoryCore, tenant: str, items: Sequence[tuple[str, list[ExportEntity], list[ExportRelation]]],
            refs: dict[str, str]) -> EntityImportCounts:
    """Write the entities, mentions and relations of imported lines (``refs``: file ref -> stored ref)."""
    counts = EntityImportCounts()
    if not any(ents or rels for _ref, ents, rels in items):
        return counts
    with core.writer.lock:
        records = core.graph.entity_records(tenant)
        held = {entity_norm(a): r.id for r in records for a in (r.name, *r.aliases)}
        mapped: dict[str, int] = {}
        with core.graph.transaction() as tx:
            for _ref, ents, _rels in items:
                for ent in ents:
                    if ent.ref in mapped:
                        continue
                    norms = [entity_norm(n) for n in (ent.name, *ent.aliases)]
                    file_id = int(ent.ref[4:])
                    target = file_id if held.get(norms[0]) == file_id else next(
                        (held[n] for n in norms if n in held), None)
                    if target is None:
                        target = file_id if not tx.id_in_use(file_id) else tx.allocate_ids(1)[0]
                        tx.reserve_ids_through(target)
                    record = EntityRecord(target, ent.name, ent.kind, tuple(ent.aliases), ent.created_us)
                    counts.entities += tx.restore_entity(tenant, record)
                    for n in norms:
                        held.setdefault(n, target)
                    mapped[ent.ref] = target
            for ref, ents, rels in items:
                if ref not in refs:
                    continue
                mem_id = parse_ref(refs[ref]).id
                counts.mentions += tx.restore_mentions(tenant, mem_id, [mapped[e.ref] for e in ents])
                tx.restore_alias_views(tenant, mem_id, [n for e in ents for n in (e.name, *e.aliases)])
                counts.relations += tx.restore_relations(tenant, [
                    EntityRelation(mapped[r.src], mapped[r.dst], r.label, mem_id) for r in rels
                    if r.src in mapped and r.dst in mapped])
    return counts
