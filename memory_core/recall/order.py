"""The order of the rows a recall returns: by confidence, except where the filter makes time the rule.

Under ``type: "handoff"`` (not ``deep``) the rows that passed the gate come newest first: a resuming
agent needs the latest handoff whatever its wording (docs/recall-ordering.md). Otherwise the rows come
by confidence, ties broken by cosine, then the newest, then the id.
"""

from __future__ import annotations

import heapq

from memory_core.recall.filters import RecallFilters
from memory_core.recall.pool import Pool, Scored

NEWEST_FIRST = "newest_first"
NEWEST_FIRST_TYPES = frozenset({"handoff"})


def newest_first(filters: RecallFilters, deep: bool) -> bool:
    """Whether the rows that pass the quality gate are ordered by time, not by confidence.

    Under ``type: "handoff"`` the newest handoff is the one a resuming agent needs, whatever
    its wording: relevance decides which handoffs are admitted, time their order. Other types
    keep the weighted recency (``type_recency_*``): a decision, note or error is one fact among
    many, and the newest one about something else must not outrank the one the query asks for
    (a decision that changed is corrected with ``update_memory``; recall then shows only its
    newest version). ``deep`` turns time off altogether, this rule included.
    """
    return not deep and filters.type in NEWEST_FIRST_TYPES


def order(pool: Pool) -> None:
    """Stage: ``pool.ranked``, the kept rows in the order returned (every kept row when repeats collapse: a
    fact's copies below the cut are still its repeats; else the first ``limit``); the gate's fallback
    ordered the same way."""
    attrs = pool.attrs
    newest = newest_first(pool.filters, pool.deep)
    if newest:
        pool.order = NEWEST_FIRST
    if pool.fallback is not None:
        if newest:
            pool.fallback.sort(key=lambda c: (-attrs[c.id].ts_us, c.id))
        return
    if newest:  # relevance admitted them; time orders them

        def rank(item: Scored) -> tuple[float, ...]:
            return -attrs[item[1].id].ts_us, -item[0], item[1].id
    else:

        def rank(item: Scored) -> tuple[float, ...]:
            return -item[0], -(item[1].cosine or 0.0), -attrs[item[1].id].ts_us, item[1].id

    pool.ranked = sorted(pool.kept, key=rank) if pool.collapsing else heapq.nsmallest(pool.limit, pool.kept, key=rank)
