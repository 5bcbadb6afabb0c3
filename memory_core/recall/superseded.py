"""Chains: a memory another one SUPERSEDES (an older link of a handoff chain) ranks below it.

:func:`link` marks each pool row with the newest memory the viewer may see that supersedes it;
:func:`penalise` then takes ``supersede.penalty`` of its relevance. A version a newer one corrected
(``update_memory``) is not in the pool at all unless ``include_superseded`` or ``deep``
(:meth:`.RecallFilters.admits`); then it ranks with the same penalty.
"""

from __future__ import annotations

from graph.api import GraphStore
from memory_core.recall.filters import RecallFilters
from memory_core.recall.pool import Candidate, Pool


def link(pool: Pool) -> None:
    """Stage: ``superseded_by`` on each pool row a newer visible memory supersedes."""
    if not pool.cfg.supersede.penalty:
        return
    cands = pool.cands
    for mem_id, newer in successors(pool.graph, pool.filters, [c.id for c in cands.values() if not c.episode]).items():
        cands[mem_id].superseded_by = newer


def successors(g: GraphStore, filters: RecallFilters, ids: list[int]) -> dict[int, int]:
    """For each memory, the newest visible memory that SUPERSEDES it (an older handoff of the chain)."""
    newer = g.superseders(filters.tenant, ids)
    if not newer:
        return {}
    nodes = g.memories(filters.tenant, {i for srcs in newer.values() for i in srcs})
    out: dict[int, int] = {}
    for mem_id, srcs in newer.items():
        seen = [a for a in (nodes.get(i) for i in srcs)
                if a is not None and (a.visibility != "agent" or a.agent == filters.viewer)]
        if seen:
            out[mem_id] = max(seen, key=lambda a: a.key).id
    return out


def penalise(pool: Pool) -> None:
    """Stage: an older link of a chain loses ``supersede.penalty``; when the caller asked for one type (the
    current one is wanted) the current link inherits the best relevance of the links it supersedes, and
    each older link stays below its successor."""
    supersede(pool.cands, pool.cfg.supersede.penalty, strict=bool(pool.filters.type))


def supersede(cands: dict[int, Candidate], penalty: float, strict: bool) -> None:
    """:func:`penalise` over ``cands``."""
    if not penalty:
        return
    keep = 1.0 - penalty
    for c in cands.values():
        if c.superseded_by is not None:
            c.rel *= keep
    if strict:
        chained = [c for c in cands.values() if c.superseded_by in cands]
        for _ in range(len(chained)):  # the current link stands for its chain: it inherits the best match
            lifted = False
            for c in chained:
                succ = cands[c.superseded_by]  # type: ignore[index]
                if c.rel > succ.rel:
                    succ.rel, lifted = c.rel, True
            if not lifted:
                break
        for _ in range(len(chained)):  # a chain settles in at most its length of passes
            changed = False
            for c in chained:
                cap = keep * cands[c.superseded_by].rel  # type: ignore[index]
                if c.rel > cap:
                    c.rel, changed = cap, True
            if not changed:
                break
