"""Lexical retrievers over the tenant's own FTS5 tables: BM25 over each memory's window
(its text plus the previous memory of its session, ``ftw_*``), and keyword phrases over
the memory's own text (``fts_*``) for exact tokens the embedder blurs (ids, code
identifiers, numbers, names).

User text never reaches FTS5's query language directly: queries are rebuilt from
``\\w+`` tokens, each double-quoted, so operators such as ``NEAR``, ``*``, ``:`` or
unbalanced quotes in a query are just words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from graph.db import GraphDB
from memory_core.recall.filters import RecallFilters

WORD = re.compile(r"\w+", re.UNICODE)
# candidate tokens for keywords; kept when identifier-like (digit, inner '_-.:/#', inner capital)
KEYWORD = re.compile(r"\w[\w.\-:/#]*\w|\w", re.UNICODE)
QUOTED = re.compile(r"\"([^\"]{2,200})\"|'([^']{2,200})'")

@dataclass(frozen=True)
class LexicalHit:
    id: int
    score: float  # larger is better (negated bm25)
    turn: float = 0.0  # window hits: the score of the memory's own text alone (0 if only its predecessor matched)


def keyword_phrases(query: str) -> list[str]:
    """Quoted strings and identifier-like tokens (``EXP-30``, ``user_id``, ``v2.5.1``, ``4096``)."""
    phrases: list[str] = [a or b for a, b in QUOTED.findall(query)]
    for token in KEYWORD.findall(query):
        inner = token[1:-1]
        if any(c.isdigit() for c in token) or any(c in "_-.:/#" for c in inner) or any(c.isupper() for c in inner):
            phrases.append(token)
    out: dict[str, None] = {}
    for phrase in phrases:
        words = WORD.findall(phrase.lower())
        if words:
            out.setdefault(" ".join(words), None)
    return list(out)


COMMON_MIN_ROWS = 2000
COMMON_SHARE = 0.05


def _match_any(terms: list[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)


class LexicalIndex:
    """BM25 and keyword search inside one tenant's FTS5 tables, with filters in SQL."""

    def __init__(self, db: GraphDB) -> None:
        self.db = db

    def window(self, filters: RecallFilters, terms: list[str], limit: int, tenant_rows: int = 0,
               own: bool = False) -> list[LexicalHit]:
        """BM25 over (text, previous text), best first; ``turn`` rides along from the same match.
        With ``own``, ranked by the memory's own text instead (what non-dialogue rows key on)."""
        with self.db.lock:
            table = self.db.window_table(self.db.conn.cursor(), filters.tenant, create=False)
            return self._search(table, filters, terms, limit, tenant_rows, window=True, own=own)

    def keywords(self, filters: RecallFilters, query: str, limit: int, tenant_rows: int = 0) -> list[LexicalHit]:
        """Exact multi-word phrases (``EXP-30`` → ``"exp 30"``) in the memory's own text."""
        phrases = [p for p in keyword_phrases(query) if " " in p]
        with self.db.lock:
            table = self.db.fts_table(self.db.conn.cursor(), filters.tenant, create=False)
            return self._search(table, filters, phrases, limit, tenant_rows, window=False)

    def _search(self, table: str | None, filters: RecallFilters, terms: list[str], limit: int, tenant_rows: int,
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
        if filters.selective:
            where, args = filters.sql_where()
            sql = (f"SELECT m.id, {ranks} FROM {table} JOIN memories m ON m.id = {table}.rowid "
                   f"WHERE {table} MATCH ? AND {where} ORDER BY rank LIMIT ?")
        else:  # the table holds only this tenant's rows; visibility is checked on the graph node
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
