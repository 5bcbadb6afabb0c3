"""Entities in export files: each memory line carries the entities it mentions (whole records:
ref, name, kind, aliases) and the relations it declared, so every line stands alone.

On import, a line's entities and relations first pass the secrets guard as add_memory's
declarations do (:func:`guard_line_entities`). Then (in the transaction that writes each memory)
each line declares its entities as its memory's author would (:mod:`graph.entity_link`): an
entity keeps its ref when the tenant holds the
same entity under a name that author may read, joins the tenant's entity that answers to one of its
names for that author, or is written under its ref (a fresh one if that id is taken or past
MAX_KEPT_ID); its aliases nobody holds are added. A name only another agent's private memories
declared is never joined: it makes way (its own key for that agent). Mentions and relations are
then written between the stored refs; a memory already present is skipped whole, so a re-import
writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from graph.api import (
    SHARED_VIEW,
    EntityIndex,
    EntityRecord,
    EntityRelation,
    GraphTxn,
    MemoryNode,
    entity_norm,
    name_keys,
    resolve_key,
)
from memory_core.entities import declared
from memory_core.refs import MAX_KEPT_ID
from memory_core.secret_guard import Scan, SecretGuard

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


def guard_line_entities(entities: Sequence[ExportEntity], relations: Sequence[ExportRelation], guard: SecretGuard
                        ) -> tuple[list[ExportEntity], list[ExportRelation]]:
    """An imported line's entities and relations through the secrets guard, as add_memory's declarations
    go (:mod:`memory_core.write.add_rows`): names, aliases and labels redacted, a kind holding a secret
    dropped; SECRET_REJECTED under ``reject``."""
    if not guard.active:
        return list(entities), list(relations)
    scan = Scan()
    out = []
    for i, e in enumerate(entities):
        name = guard.text(e.name, f"entities[{i}].name", scan)
        aliases = [guard.text(a, f"entities[{i}].aliases[{j}]", scan) for j, a in enumerate(e.aliases)]
        kind = e.kind if e.kind is None or guard.text(e.kind, f"entities[{i}].kind", scan) == e.kind else None
        out.append(e.model_copy(update={"name": name, "aliases": list(dict.fromkeys(aliases)), "kind": kind}))
    labels = [r.model_copy(update={"label": guard.text(r.label, f"relations[{k}].label", scan)})
              for k, r in enumerate(relations)]
    guard.finish(scan, "line")
    return out, labels


@dataclass
class EntityExporter:
    """The tenant's entity records and relations, read once per export."""

    records: dict[int, EntityRecord]
    relations: dict[int, list[EntityRelation]]
    views: dict[tuple[int, str], frozenset[str]]

    @classmethod
    def of(cls, graph: EntityIndex, tenant: str) -> EntityExporter:
        by_mem: dict[int, list[EntityRelation]] = {}
        for rel in graph.all_relations(tenant):
            by_mem.setdefault(rel.mem_id, []).append(rel)
        return cls({r.id: r for r in graph.entity_records(tenant)}, by_mem, graph.alias_views(tenant))

    def _entity(self, record: EntityRecord, memory: MemoryNode | None) -> ExportEntity:
        """The entity as the line's memory's readers may see it: a shared line carries no alias only
        private memories declared (so an import keeps them private); first visible name first."""
        readers = {SHARED_VIEW} if memory is None or memory.visibility == "tenant" else {SHARED_VIEW, memory.agent}
        names = [a for a in record.aliases if self.views.get((record.id, entity_norm(a)), frozenset()) & readers]
        names = names or [record.name]
        return ExportEntity(ref=f"ent:{record.id}", name=names[0], kind=record.kind, aliases=names,
                            created_us=record.created_us)

    def fields(self, graph: EntityIndex, tenant: str, ids: Sequence[int],
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


@dataclass(frozen=True)
class ImportedMemory:
    """A memory an import has just written, with the entities and relations its line declared."""

    id: int
    agent: str
    shared: bool  # visibility "tenant": every agent may read the names it declares
    entities: list[ExportEntity]
    relations: list[ExportRelation]


@dataclass
class EntityRestore:
    """The entities an import has resolved so far: ``mapped`` (entity ref in the file -> the stored id).
    :meth:`write` works on a copy (:meth:`attempt`), kept only once the transaction it ran in has
    committed (:meth:`keep`)."""

    mapped: dict[str, int]

    def attempt(self) -> EntityRestore:
        return EntityRestore(dict(self.mapped))

    def keep(self, attempt: EntityRestore) -> None:
        self.mapped = attempt.mapped

    def write(self, tx: GraphTxn, tenant: str, items: Sequence[ImportedMemory]) -> EntityImportCounts:
        """Inside the transaction that wrote the memories ``items`` name: their entities (resolved as
        each memory's author resolves names, see :func:`_target`), mentions, alias views and relations."""
        counts = EntityImportCounts()
        for item in items:
            for ent in item.entities:
                target = _target(tx, tenant, ent, item, self.mapped.get(ent.ref))
                record = EntityRecord(target, ent.name, ent.kind, tuple(ent.aliases), ent.created_us)
                counts.entities += tx.restore_entity(tenant, record)
                self.mapped[ent.ref] = target
            # whoever may read the memory may read the names it declared
            tx.restore_alias_views(tenant, item.id, [n for e in item.entities for n in (e.name, *e.aliases)])
        for item in items:
            counts.mentions += tx.restore_mentions(tenant, item.id, [self.mapped[e.ref] for e in item.entities
                                                                     if e.ref in self.mapped])
            counts.relations += tx.restore_relations(tenant, [
                EntityRelation(self.mapped[r.src], self.mapped[r.dst], r.label, item.id) for r in item.relations
                if r.src in self.mapped and r.dst in self.mapped])
        return counts


def _target(tx: GraphTxn, tenant: str, ent: ExportEntity, memory: ImportedMemory, known: int | None) -> int:
    """The stored entity an imported line's entity is, as the line's memory resolves its names;
    another agent's private names in the way make way first (graph.entity_link.link does the same)."""
    author = memory.agent
    norms = list(dict.fromkeys(entity_norm(n) for n in (ent.name, *ent.aliases)))
    found = tx.lookup_keys(tenant, [k for n in norms for k in name_keys(n, author)])
    for norm in norms:
        held = found.get(norm)
        if held is not None and not held[1] & {SHARED_VIEW, author}:
            tx.rekey_private(tenant, norm)
            del found[norm]
    if known is not None:
        return known
    seen = {n: e for n in norms if (e := resolve_key(found, n, author, shared_first=memory.shared)) is not None}
    file_id = int(ent.ref[4:])
    target = file_id if seen.get(norms[0]) == file_id else next((seen[n] for n in norms if n in seen), None)
    if target is None:
        keep = file_id <= MAX_KEPT_ID and not tx.id_in_use(file_id)
        target = file_id if keep else tx.allocate_ids(1)[0]
        tx.reserve_ids_through(target)
    return target
