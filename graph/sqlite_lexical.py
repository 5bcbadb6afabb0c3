"""BM25 and phrase search in one tenant's FTS5 tables, with row filters inside the SQL.

``ftw_*`` holds each memory's window (its text and the previous shared memory of its
session), ``fts_*`` its own text. Terms reach FTS5 only double-quoted: operators such as
``NEAR``, ``*`` or ``:`` in user text are just words. Called under the store's lock.
"""

from __future__ import annotations

import re
from typing import Any

from graph.api import LexicalHit, RowFilter
from graph.db import GraphDB

COMMON_MIN_ROWS = 2000
COMMON_SHARE = 0.05


def _match_any(terms: list[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)


def sql_where(f: RowFilter) -> tuple[str, list[Any]]:
    """A clause over ``memories m`` (tenant included) with its parameters."""
    parts, args = ["m.tenant = ?"], [f.tenant]
    for key in ("type", "session", "agent", "channel"):
        value = getattr(f, key)
        if value:
            parts.append(f"m.{key} = ?")
            args.append(value)
    if f.source_prefix:
        parts.append("m.source_id LIKE ? ESCAPE '\\'")
        args.append(re.sub(r"([\\%_])", r"\\\1", f.source_prefix) + "%")
    if f.project is not None:
        parts.append("m.project_id IS NULL" if f.project == "" else "(m.project_id IS NULL OR m.project_id = ?)")
        if f.project:
            args.append(f.project)
    parts.append("(m.visibility = 'tenant' OR m.agent = ?)")
    args.append(f.viewer or "\x00")
    return " AND ".join(parts), args


class SqliteLexical:
    def __init__(self, db: GraphDB) -> None:
        self.db = db

    def window(self, f: RowFilter, terms: list[str], limit: int, tenant_rows: int, *, own: bool) -> list[LexicalHit]:
        table = self.db.window_table(self.db.conn.cursor(), f.tenant, create=False)
        return self._search(table, f, terms, limit, tenant_rows, window=True, own=own)

    def phrases(self, f: RowFilter, phrases: list[str], limit: int, tenant_rows: int) -> list[LexicalHit]:
        table = self.db.fts_table(self.db.conn.cursor(), f.tenant, create=False)
        return self._search(table, f, phrases, limit, tenant_rows, window=False)

    def _search(self, table: str | None, f: RowFilter, terms: list[str], limit: int, tenant_rows: int,
                window: bool, own: bool = False) -> list[LexicalHit]:
        if table is None or not terms or limit <= 0:
            return []
        terms = self._prune_common(table, terms, tenant_rows)
        if not terms:
            return []
        # two bm25() calls per matched row at most: each one costs a pass over the row's postings
        if own:  # ranked by the own-text score; the window score rides along
            ranks = f"bm25({table}, 1.0, 0.0) AS rank, bm25({table}, 1.0, 1.0)"
        elif window:
            ranks = f"bm25({table}, 1.0, 1.0) AS rank, bm25({table}, 1.0, 0.0)"
        else:
            ranks = f"bm25({table}) AS rank, 0.0"
        if f.selective:
            where, args = sql_where(f)
            sql = (f"SELECT m.id, {ranks} FROM {table} JOIN memories m ON m.id = {table}.rowid "
                   f"WHERE {table} MATCH ? AND {where} ORDER BY rank LIMIT ?")
        else:  # the table holds only this tenant's rows; visibility is checked on the memory node
            sql = f"SELECT rowid, {ranks} FROM {table} WHERE {table} MATCH ? ORDER BY rank LIMIT ?"
            args = []
        rows = self.db.conn.execute(sql, [_match_any(terms), *args, limit]).fetchall()
        if own:  # (id, own, window)
            return [LexicalHit(int(i), -float(win), max(0.0, -float(rank))) for i, rank, win in rows]
        if window:  # (id, window, own)
            return [LexicalHit(int(i), -float(rank), max(0.0, -float(turn))) for i, rank, turn in rows]
        return [LexicalHit(int(i), -float(rank), -float(rank)) for i, rank, _zero in rows]

    def _prune_common(self, table: str, terms: list[str], tenant_rows: int) -> list[str]:
        """Drop terms that occur in a large share of a big tenant's rows.

        BM25 gives such terms almost no weight, yet scoring their postings dominates the
        cost (an OR with a term in 95% of 100k rows takes ~180 ms). A LIMIT probe per term
        costs ~0.2 ms. When every term is that common the lexical branch has nothing to
        discriminate with and is skipped (the vector branch still answers).
        """
        cap = max(COMMON_MIN_ROWS, int(tenant_rows * COMMON_SHARE))
        if tenant_rows <= cap or len(terms) == 1:
            return terms
        counts = {}
        for term in terms:
            counts[term] = self.db.conn.execute(
                f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                (f'"{term}"', cap),
            ).fetchone()[0]
        return [t for t in terms if counts[t] < cap]
