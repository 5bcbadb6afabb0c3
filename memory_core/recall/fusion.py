"""Fusion: every branch's lists into one base score per row, read the same way for every branch.

- ``rsf`` (relative-score fusion, the default): each branch adds its weighted share of the row's
  relevance as it scales its own scores (its ``fuse``, :mod:`.branches.api`: the vector branch min-max over its pool,
  BM25 and keywords over their best, entities by rarity), in the branch list's order;
- ``rrf`` (reciprocal-rank fusion): ``Σ 1/(rrf_k + rank)`` over every list that holds the row, scaled
  to the best; the branches' weights do not apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.recall.pool import Pool


def best(values: Sequence[float]) -> float:
    """The largest positive value (1 when there is none): what a branch's scores are scaled by."""
    return max((x for x in values if x > 0), default=1.0)


def rrf(ranks: dict[str, int], k: int) -> float:
    """Reciprocal-rank fusion of one row's ranks."""
    return sum(1.0 / (k + r + 1) for r in ranks.values())


def fuse(pool: Pool) -> None:
    """Each row's ``base`` from the branches' lists (``rsf`` or ``rrf``, see the module docstring)."""
    cands, cfg = pool.cands, pool.cfg.fusion
    if cfg.method == "rrf":
        for c in cands.values():
            c.base = rrf(c.ranks, cfg.rrf_k)
        top = best([c.base for c in cands.values()])
        for c in cands.values():
            c.base /= top
        return
    for branch in pool.branches:
        branch.fuse(pool)
