"""The quality gate: which scored rows a recall returns, or, when none passes, which weak matches instead.

The gate asks whether the query matched at all: its best row's confidence (among rows of at least
``gate.min_relevance``) must reach ``gate.quality``, or nothing passes. Each row then passes on its own
confidence (``gate.row``), or on its own absolute evidence (``gate.evidence``: a close cosine, most of
the query's words): the best row's strength must not push out rows that match well themselves. A row
below ``gate.min_relevance`` never passes: recency and salience alone never carry a row through.

If nothing passes, the lexical matches below it are returned instead of nothing (``gate_fallback``).
"""

from __future__ import annotations

from memory_core.recall.pool import Pool


def gate(pool: Pool) -> None:
    """Stage: ``pool.kept``, the rows that pass; or ``pool.fallback``, the below-gate lexical matches
    (best first) when rows were scored and none passed."""
    cfg, scored = pool.cfg.gate, pool.scored
    best = max((conf for conf, c in scored if c.relevance >= cfg.min_relevance), default=0.0)
    row_gate = cfg.quality if cfg.row is None else cfg.row
    pool.kept = [] if best < cfg.quality else [
        (conf, c) for conf, c in scored if c.relevance >= cfg.min_relevance
        and (conf >= row_gate or c.evidence >= cfg.evidence)]
    if not pool.kept and scored:
        pool.fallback = [c for _conf, c in sorted(scored, key=lambda item: -item[0]) if c.turn or c.keyword]
