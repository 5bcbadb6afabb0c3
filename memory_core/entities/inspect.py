"""Entities as the operator's inspector shows them: every name and alias and every mention,
private ones included (the operator sees all), gathered as the shared view plus each agent's
(at most ``AGENT_CAP`` agents, ``MENTION_CAP`` mentions per view), so no unbounded scan runs."""

from __future__ import annotations

from dataclasses import dataclass

from graph.api import EntityIndex, GraphStore, ent_node

AGENT_CAP = 200
MENTION_CAP = 50


@dataclass(frozen=True, slots=True)
class EntityView:
    ref: str
    name: str
    kind: str | None
    aliases: list[str]
    mentions: list[int]  # memory ids, newest first (at most MENTION_CAP)


def operator_entity(graph: GraphStore, tenant: str, entity_id: int, *, with_mentions: bool = True) -> EntityView | None:
    """The entity with everything any viewer may see of it; None when no memory mentions it."""
    viewers: list[str | None] = [None, *sorted(graph.agents(tenant))[:AGENT_CAP]]
    nodes = [(v, n) for v in viewers if (n := graph.entity(tenant, entity_id, v)) is not None]
    if not nodes:
        return None
    aliases = list(dict.fromkeys(a for _v, n in nodes for a in n.aliases))
    mentions: set[int] = set()
    if with_mentions:
        for v, _n in nodes:
            mentions.update(graph.entity_mentions(tenant, [entity_id], v, MENTION_CAP).get(entity_id, []))
    found = graph.memories(tenant, mentions)
    newest = sorted(found, key=lambda i: (found[i].ts_us, i), reverse=True)[:MENTION_CAP]
    first = nodes[0][1]
    return EntityView(first.ref, aliases[0] if aliases else first.name, first.kind, aliases, newest)


def operator_memory_entities(graph: EntityIndex, tenant: str, mem_id: int) -> list[EntityView]:
    """The entities one memory mentions with every alias (one read; no mention lists)."""
    ids = graph.memory_entities(tenant, [mem_id]).get(mem_id, [])[:64]
    records = {r.id: r for r in graph.entity_records(tenant, ids)}
    return [EntityView(ent_node(r.id), r.aliases[0] if r.aliases else r.name, r.kind, list(r.aliases), [])
            for r in (records.get(i) for i in ids) if r is not None]
