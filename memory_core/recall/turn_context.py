"""A dialogue turn read with its author's previous turn: what the author said just before lends
its vector similarity to the turn.

An answer often sits in a reply whose topic its author named a turn earlier, with the other
side's question between them: "I had a picnic with friends from church" — "What games did you
play?" — "Some fun ones like charades". A question about the picnic's games meets the first
turn's words and the last one's answer. So each of the ``context.sources`` turns of the vector
pool nearest the query lends ``context.weight`` × its scaled cosine to the next turn by the same
author, at most two turns on in its session, with the turn between them (if any) a dialogue
turn the viewer may see. Only rows already in the pool gain (no row joins), and only the vector
part is lent: passing a turn's whole score (speaker, words, graph signals) two turns on lifted
rows that merely sat near a good match.
"""

from __future__ import annotations

from graph.api import GraphStore, MemoryNode
from memory_core.recall.filters import RecallFilters
from memory_core.recall.pool import Around, Candidate, Pool


def _next_id(around: Around, mem_id: int) -> int | None:
    pair = around.get(mem_id)
    return None if pair is None or pair[1] is None else pair[1][1]


def lend(pool: Pool) -> None:
    """Stage: each pool turn gains what its author's previous turn lends it (the diagnostics say how many)."""
    cfg = pool.cfg.context
    pool.diagnostics["context_lent"] = lend_previous(pool.graph, pool.filters, pool.cands, pool.attrs, pool.around,
                                                     cfg.weight, cfg.sources)


def lend_previous(graph: GraphStore, filters: RecallFilters, cands: dict[int, Candidate],
                  attrs: dict[int, MemoryNode], around: Around, weight: float, most: int) -> int:
    """Adds ``weight`` × the best scaled cosine among a turn's author's previous turns (one or two
    back) to each pool turn's relevance, from the ``most`` turns of the vector pool nearest the query;
    returns how many turns gained."""
    if weight <= 0 or most <= 0:
        return 0
    tenant = filters.tenant
    sources = sorted((c for c in cands.values() if c.dialogue and c.vec > 0 and c.id in attrs),
                     key=lambda c: -c.vec)[:most]
    known: Around = dict(around)
    unread = [attrs[c.id] for c in sources if c.id not in known]
    if unread:
        known.update(graph.adjacent_many(tenant, unread))
    first = {c.id: n for c in sources if (n := _next_id(known, c.id)) is not None}
    # the turn right after a source: its author decides whether it is the target or a step to one
    fresh = graph.memories(tenant, [n for n in first.values() if n not in attrs])
    seen = {n: a for n in set(first.values())
            if (a := attrs.get(n) or fresh.get(n)) is not None and a.type == "turn"
            and (n in attrs or filters.admits(a))}
    steps = [seen[n] for p, n in first.items() if n in seen and seen[n].agent != attrs[p].agent and n not in known]
    if steps:
        known.update(graph.adjacent_many(tenant, steps))
    gained: dict[int, float] = {}
    for p, n in first.items():
        step = seen.get(n)
        if step is None:
            continue
        target = n if step.agent == attrs[p].agent else _next_id(known, n)
        if target is None or target not in cands or not cands[target].dialogue or target not in attrs \
                or attrs[target].agent != attrs[p].agent:
            continue
        gained[target] = max(gained.get(target, 0.0), cands[p].vec)
    for mem_id, vec in gained.items():
        bonus = weight * vec
        c = cands[mem_id]
        c.rel += bonus
        c.graph += bonus
    return len(gained)


__all__ = ["lend", "lend_previous"]
