"""Stale facts step aside: a row a newer memory contradicts ranks below it, marked, never hidden.

Without a model: among the rows the gate kept (the best ``stale.pool`` of them by confidence), an older
row is *possibly stale* when a newer one (later in validity: ``valid_from``, else its timestamp)

- is a statement of how things are, not a record of what happened (neither is of a type in
  ``stale.skip_types``: turns, events and errors stay true as records; handoffs have their own chains),
- is about the same entities: they share at least one, and each mentions at most ``stale.unshared`` the
  other does not (the value that changed; two fixes of one exception in different functions differ by two,
  the function and the file, and are not a change of one fact),
- answers the query about as well (its confidence is at least ``stale.near`` × the older row's: when the
  query matches the older row much better, that row is what was asked for),
- is near it in meaning, but not a copy: the cosine of their stored vectors (Chroma's, not embedded again)
  is in ``[stale.low, stale.high)`` and their texts differ (a copy is a repeat, :mod:`.collapse`).

Such a row keeps its place in the result, below the newer one: its confidence becomes at most
``stale.step`` × the newer row's, its row says ``possibly_stale`` and ``newer``, and its ``match_reason``
carries ``stale: {newer, cosine, entities}``. ``include_stale`` (or ``deep``) skips the stage: every row as
it was. The thresholds were chosen by measurement (``python -m bench.quality.updates``,
docs/performance.md): fact sequences whose value changes, and pairs about one entity that say different
things (an owner and a region of one service), which must not be marked.

Only rows the viewer may read are in the pool, so a private row never marks a shared one stale for
another agent, and an ``as_of`` recall compares only the rows valid then.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from memory_core.recall.pool import Pool, StaleMark
from memory_core.refs import memory_ref


def step_aside(pool: Pool) -> None:
    """Stage: older rows a newer kept row contradicts go below it, marked (see the module docstring)."""
    cfg = pool.cfg.stale
    if pool.filters.include_stale or pool.deep or not cfg.pool or pool.fallback is not None or pool.vectors is None:
        return
    attrs = pool.attrs
    facts = sorted((item for item in pool.kept if not item[1].episode and item[1].id in attrs
                    and attrs[item[1].id].type not in cfg.skip_types), key=lambda item: -item[0])[:cfg.pool]
    if len(facts) < 2:
        return
    ids = [c.id for _conf, c in facts]
    about = pool.graph.memory_entities(pool.filters.tenant, ids)
    ents = {i: set(about.get(i, ())) for i in ids}
    conf = {c.id: value for value, c in pool.kept}
    pairs = [(old, new) for old in ids for new in ids
             if _later(attrs[new].valid_since_us, new, attrs[old].valid_since_us, old)
             and conf[new] >= cfg.near * conf[old]
             and attrs[new].content_hash != attrs[old].content_hash
             and ents[old] & ents[new]
             and len(ents[old] - ents[new]) <= cfg.unshared and len(ents[new] - ents[old]) <= cfg.unshared]
    if not pairs:
        return
    involved = sorted({i for pair in pairs for i in pair})
    stored = pool.vectors.embeddings(pool.filters.tenant, [memory_ref(i) for i in involved])
    vectors = {i: stored[memory_ref(i)] for i in involved if memory_ref(i) in stored}
    marks: dict[int, StaleMark] = {}
    for old, new in pairs:
        if old not in vectors or new not in vectors:
            continue
        cos = _cosine(vectors[old], vectors[new])
        if not cfg.low <= cos < cfg.high:
            continue
        known = marks.get(old)
        if known is None or _later(attrs[new].valid_since_us, new, attrs[known.newer].valid_since_us, known.newer):
            shared = tuple(sorted(ents[old] & ents[new]))
            marks[old] = StaleMark(new, round(cos, 4), shared)
    if not marks:
        return
    for _ in range(len(marks)):  # a chain of three settles in as many passes: each below the one after it
        moved = False
        for old, mark in marks.items():
            cap = cfg.step * conf[mark.newer]
            if conf[old] > cap:
                conf[old], moved = cap, True
        if not moved:
            break
    for _value, c in pool.kept:
        if c.id in marks:
            c.stale = marks[c.id]
    pool.kept = [(conf[c.id], c) for _value, c in pool.kept]
    pool.diagnostics["stale"] = len(marks)


def _later(a_us: int, a_id: int, b_us: int, b_id: int) -> bool:
    return (a_us, a_id) > (b_us, b_id)


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0
