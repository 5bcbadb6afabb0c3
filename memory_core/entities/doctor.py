"""Doctor's check of the entity graph: no MENTIONS or RELATED row may outlive its memory or entity.

A delete removes a memory's mentions and the relations it declared in the same transaction, so
these rows appear only after damage underneath the service (a row removed by hand, a partial
restore of a backup). An entity no memory mentions any more is *not* a finding: it stays, its
aliases still resolve (a later mention reuses it), and no viewer sees it until then.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from graph.api import EntityIndex, EntityRelation, StoreLifecycle


@dataclass(frozen=True, slots=True)
class DanglingEntityRows:
    tenant: str
    mentions: list[tuple[int, int]]  # (memory id, entity id)
    relations: list[EntityRelation]

    def lines(self) -> list[tuple[str, str]]:
        """(ref, sentence) per row, for findings and repairs."""
        out = [(f"mem:{m}", f"MENTIONS -> ent:{e}") for m, e in self.mentions]
        out += [(f"mem:{r.mem_id}", f"RELATED ent:{r.src} -[{r.label}]-> ent:{r.dst}") for r in self.relations]
        return out


def dangling(graph: EntityIndex, tenant: str, memory_ids: Iterable[int]) -> DanglingEntityRows:
    """The tenant's MENTIONS and RELATED rows whose memory or entity is not the tenant's."""
    memories = set(memory_ids)
    entities = {r.id for r in graph.entity_records(tenant)}
    mentions = [(m, e) for m, e in graph.all_mentions(tenant) if m not in memories or e not in entities]
    relations = [r for r in graph.all_relations(tenant)
                 if r.mem_id not in memories or r.src not in entities or r.dst not in entities]
    return DanglingEntityRows(tenant, mentions, relations)


def remove(graph: StoreLifecycle, found: DanglingEntityRows) -> int:
    """Delete exactly these rows, in one transaction; how many existed."""
    if not found.mentions and not found.relations:
        return 0
    with graph.transaction() as tx:
        return tx.erase_entity_links(found.tenant, found.mentions, found.relations)
