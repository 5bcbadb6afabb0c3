"""Estimated row counts of a big PostgreSQL tenant's common query words, as ``graph.sqlite.lexical`` takes them.

In a tenant of at least 4 x ``sample_rows`` memories, whether a common word (not rare by the first
probe) is dropped or kept as a mid word is decided on an estimate, not an exact count up to the cap:
the word's rows among the tenant's newest ``sample_rows`` memories by id (the rows SQLite's window
table holds under its newest rowids: one a memory, rowid = memory id), counted up to a little past
``COMMON_SHARE`` of them, scaled to the tenant: ``max(min_rows, round(held / sampled * rows))``.

Estimates are kept per process (one :class:`SampledCounts` per store) with the tenant's change
clock ``tenant_state.changes`` (memories written or erased, and windows rebuilt, by any replica) at
the time, and taken again once the clock has moved ``sample_rows // 10`` since, as SQLite does with
its process's own writes. The clock is read with the tenant's row count, before the counts, so a
write landing in between only makes the next search refresh sooner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from psycopg import Connection

from graph.node_cache import LRU

SAMPLE_ROWS = 20_000  # graph.sqlite.lexical.SAMPLE_ROWS
COMMON_SHARE = 0.05
KEPT = 4096

# the newest sample_rows memories of the tenant: the first id among them and how many (fewer: the whole
# tenant), from one walk down the tenant's (tenant, id) index (migration 8)
_SAMPLE = "SELECT min(id), count(*) FROM (SELECT id FROM memories WHERE tenant = %s ORDER BY id DESC LIMIT %s) AS s"
# each lexeme's rows from that id on, up to the stop, in one trip
_HELD = r"""SELECT u.lexeme, (SELECT count(*) FROM (
    SELECT 1 FROM memories WHERE tenant = %s AND id >= %s
    AND tsv_win @@ ('''' || replace(replace(u.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery LIMIT %s) AS x)
FROM unnest(%s::text[]) AS u(lexeme)"""


class SampledCounts:
    """The estimates of one store (thread-safe: the caches are locked LRUs)."""

    def __init__(self, sample_rows: int = SAMPLE_ROWS) -> None:
        self.sample_rows = sample_rows
        self._estimates: LRU[tuple[str, str], tuple[int, int]] = LRU(KEPT)  # (tenant, lexeme) -> (rows, clock)
        self._samples: LRU[str, tuple[int, int, int]] = LRU(KEPT)  # tenant -> (first id, rows, clock)

    def applies(self, rows: int) -> bool:
        """A tenant of ``rows`` memories estimates its common words (else counts them exactly)."""
        return rows >= 4 * self.sample_rows

    def forget(self) -> None:
        self._estimates.clear()
        self._samples.clear()

    def estimates(self, conn: Connection[Any], tenant: str, lexemes: Sequence[str], *, rows: int, min_rows: int,
                  changes: int) -> dict[str, int]:
        """Each lexeme's rows in the tenant of ``rows`` memories, estimated (see the module docstring);
        ``changes`` is the tenant's change clock, read before this call."""
        refresh = max(1, self.sample_rows // 10)
        start, sampled = self._sample(conn, tenant, refresh, changes)
        share = int(sampled * COMMON_SHARE)
        stop = share + max(16, share // 8)  # past it the word is dropped whatever its count
        out: dict[str, int] = {}
        todo = []
        for lexeme in lexemes:
            kept = self._estimates.get((tenant, lexeme))
            if kept is not None and changes - kept[1] < refresh:
                out[lexeme] = kept[0]
            else:
                todo.append(lexeme)
        if todo:
            for lexeme, held in conn.execute(_HELD, [tenant, start, stop, todo]).fetchall():
                n = max(min_rows, round(int(held) / max(1, sampled) * rows))  # not rare: probed so
                out[str(lexeme)] = n
                self._estimates.put((tenant, str(lexeme)), (n, changes))
        return out

    def _sample(self, conn: Connection[Any], tenant: str, refresh: int, changes: int) -> tuple[int, int]:
        """(first id, rows) of the tenant's newest ``sample_rows`` memories."""
        kept = self._samples.get(tenant)
        if kept is not None and changes - kept[2] < refresh:
            return kept[0], kept[1]
        row = conn.execute(_SAMPLE, [tenant, max(1, self.sample_rows)]).fetchone()
        start, sampled = (int(row[0]), int(row[1])) if row is not None and row[0] is not None else (0, 0)
        self._samples.put(tenant, (start, sampled, changes))
        return start, sampled
