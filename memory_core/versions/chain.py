"""A memory's version chain (update_memory), read from the graph: older versions by each row's
``supersedes_id``, newer ones by the SUPERSEDES edges whose source names it as its
``supersedes_id`` (a handoff chain's edges are not versions), or, for a row consolidation merged,
the canonical memory that lists it under :data:`MERGED`. Only rows the viewer can read are
followed: another agent's private version ends the chain as if it were absent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from graph.api import EdgeIndex, MemoryNode, MemoryRows
from memory_core.reads import visible

MAX_CHAIN = 1_000  # a guard against a damaged store's cycle, far above any real history
MERGED = "consolidated"  # metadata key of a canonical memory: the refs it merged (memory_core.operator.consolidation)


class ChainGraph(MemoryRows, EdgeIndex, Protocol):
    """What a chain is read from: memories by id, and the SUPERSEDES edges that name their successors."""


def _readable(node: MemoryNode | None, viewer: str | None, private_too: bool) -> MemoryNode | None:
    return node if node is not None and (private_too or visible(node, viewer)) else None


def newer_version(graph: ChainGraph, tenant: str, node: MemoryNode, viewer: str | None,
                  private_too: bool = False) -> MemoryNode | None:
    """The version that corrects ``node``, when there is one the viewer can read."""
    sources = graph.superseders(tenant, [node.id]).get(node.id, [])
    found = graph.memories(tenant, sources)
    for mem_id in sorted(sources):
        succ = _readable(found.get(mem_id), viewer, private_too)
        if succ is not None and (succ.supersedes_id == node.id or _merged_into(succ, node)):
            return succ
    return None


def _merged_into(canonical: MemoryNode, node: MemoryNode) -> bool:
    """Whether ``canonical`` is the consolidation that ended ``node`` (and was not undone)."""
    mark = canonical.metadata.get(MERGED)
    return (isinstance(mark, dict) and not mark.get("undone") and node.valid_to_us == canonical.ts_us
            and f"mem:{node.id}" in mark.get("merged", ()))


def chain_of(graph: ChainGraph, tenant: str, node: MemoryNode, viewer: str | None, *,
             private_too: bool = False) -> list[MemoryNode]:
    """Every readable version of ``node``'s chain, oldest first (``node`` itself included)."""
    older: list[MemoryNode] = []
    seen = {node.id}
    current = node
    while current.supersedes_id is not None and len(seen) < MAX_CHAIN:
        prev = _readable(graph.memory(tenant, current.supersedes_id), viewer, private_too)
        if prev is None or prev.id in seen:
            break
        older.append(prev)
        seen.add(prev.id)
        current = prev
    newer: list[MemoryNode] = []
    current = node
    while current.valid_to_us is not None and len(seen) < MAX_CHAIN:
        succ = newer_version(graph, tenant, current, viewer, private_too)
        if succ is None or succ.id in seen:
            break
        newer.append(succ)
        seen.add(succ.id)
        current = succ
    return [*reversed(older), node, *newer]


def head_of(graph: ChainGraph, tenant: str, node: MemoryNode, viewer: str | None, *,
            private_too: bool = False) -> MemoryNode | None:
    """The newest readable version of ``node``'s chain (None: no readable version is current)."""
    last = chain_of(graph, tenant, node, viewer, private_too=private_too)[-1]
    return last if last.valid_to_us is None else None


@dataclass(frozen=True)
class ChainAt:
    """An ``as_of`` read's resolver (:class:`memory_core.reads.VersionAt`): the version of a memory's chain
    that was valid at ``at_us`` and that ``viewer`` may read (None when none was: not yet written, or ended)."""

    graph: ChainGraph
    tenant: str
    viewer: str | None
    at_us: int
    private_too: bool = False

    def __call__(self, node: MemoryNode) -> MemoryNode | None:
        if node.valid_at(self.at_us):
            return node
        chain = chain_of(self.graph, self.tenant, node, self.viewer, private_too=self.private_too)
        return next((n for n in chain if n.valid_at(self.at_us)), None)
