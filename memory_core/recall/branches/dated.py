"""The dated branch: a question that names a day brings that day's memories into the pool.

The vector and lexical pools hold the rows nearest the query's words. The time signal
(``w_time``, :func:`memory_core.recall.dates.date_score`) reorders the rows already in them, so
in a tenant of thousands of rows a question whose words are generic ("What did John and Tim talk
about on 11 December, 2023?") misses the day it names: its rows are not near enough to join.

For each absolute day the query names (not a month or a year: too many rows to be a hint; not a
relative day, which is a guess about when the question is asked), the newest ``dated.rows``
memories of that day (in the filter's session when one is set) are scored against the query's
embedding over exactly those ids, beside the vector branch's own query, and the nearest
``dated.pool`` of them join the vector pool as ordinary vector hits. They then pass the same
filter checks as the vector branch's (before the cut). Rows below the cosine floor of the vector
scale stay out, so joining rows do not move the scale the pool's own rows are scored on.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor, Future
from typing import Any

from graph.api import GraphStore
from memory_core.errors import StoreError
from memory_core.models import to_us
from memory_core.recall.dates import DAY_WINDOW, DateWindow
from memory_core.recall.filters import RecallFilters
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import QueryReading
from memory_core.recall.scoring import COSINE_FLOOR
from memory_core.refs import memory_ref
from memory_core.vectors.api import VectorHit, VectorStore


def _days(reading: QueryReading) -> list[DateWindow]:
    return [w for w in reading.dates if w.kind == DAY_WINDOW and not w.relative]


def dated_hits(
    graph: GraphStore, vectors: VectorStore, filters: RecallFilters, reading: QueryReading,
    embedding: Sequence[float], rows: int, pool: int,
) -> list[VectorHit]:
    """The ``pool`` rows nearest ``embedding`` among the newest ``rows`` of each day ``reading`` names."""
    ids: dict[int, None] = {}
    for day in _days(reading):
        start = to_us(day.start)
        for ts_us, mem_id in graph.page(filters.tenant, filters.session, (to_us(day.end), -1), rows):
            if ts_us >= start:
                ids.setdefault(mem_id, None)
    nodes = graph.memories(filters.tenant, ids)  # the filters apply before the cut, as on every vector path
    refs = [memory_ref(i) for i in ids if (a := nodes.get(i)) is not None and filters.admits(a)]
    if not refs:
        return []
    found = vectors.query(filters.tenant, embedding, min(pool, len(refs)), ids=refs)
    return [h for h in found if 1.0 - h.distance >= COSINE_FLOOR]


def search(
    workers: Executor, graph: GraphStore, vectors: VectorStore, filters: RecallFilters, reading: QueryReading,
    embedding: Sequence[float], cfg: RecallConfig,
) -> Future[list[VectorHit]] | None:
    """:func:`dated_hits` started beside the vector branch's own query, when the query names a day."""
    if not _days(reading) or cfg.dated.rows <= 0 or cfg.dated.pool <= 0:
        return None
    return workers.submit(dated_hits, graph, vectors, filters, reading, embedding, cfg.dated.rows, cfg.dated.pool)


def joined(
    pending: Future[list[VectorHit]] | None, hits: Sequence[VectorHit], diagnostics: dict[str, Any],
) -> list[VectorHit]:
    """The dated rows ``hits`` lacks; a vector store failing them costs only them (said in ``diagnostics``)."""
    if pending is None:
        return []
    try:
        found = pending.result()
    except StoreError as exc:
        diagnostics["dated_search"] = f"unavailable: {exc.message}"
        return []
    seen = {h.id for h in hits}
    out = [h for h in found if h.id not in seen]
    diagnostics["dated_joined"] = len(out)
    return out
