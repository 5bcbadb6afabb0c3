"""Lexical retrievers over the tenant's own FTS5 table: BM25 over words, and keyword
phrases for exact tokens the embedder blurs (ids, code identifiers, numbers, names).

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

_STOPWORDS_TEXT = """
a an and are as at be been being but by can could did do does doing for from had has have having he
her here hers him his how i if in into is it its itself just me might my no nor not of off on once
only or other our ours out over own same she should so some such than that the their theirs them
then there these they this those through to too under until up very was we were what when where
which while who whom why will with would you your yours yourself about above after again against all
am any because before below between both down during each few further more most s t don now also
ever still yet really much many like get got tell know think thing things
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


@dataclass(frozen=True)
class LexicalHit:
    id: int
    score: float  # larger is better (negated bm25)


def content_terms(query: str) -> list[str]:
    """Lower-cased words minus stopwords, in order, without repeats."""
    seen: dict[str, None] = {}
    for word in WORD.findall(query.lower()):
        if word not in STOPWORDS and (len(word) > 1 or word.isdigit()):
            seen.setdefault(word, None)
    return list(seen)


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


def _match_any(terms: list[str]) -> str:
    return " OR ".join(f'"{t}"' for t in terms)


class LexicalIndex:
    """BM25 and keyword search inside one tenant's FTS5 table, with filters in SQL."""

    def __init__(self, db: GraphDB) -> None:
        self.db = db

    def _search(self, filters: RecallFilters, match: str, limit: int) -> list[LexicalHit]:
        if not match or limit <= 0:
            return []
        with self.db.lock:
            table = self.db.fts_table(self.db.conn.cursor(), filters.tenant, create=False)
            if table is None:
                return []
            where, args = filters.sql_where()
            sql = (
                f"SELECT m.id, bm25({table}) AS rank FROM {table} JOIN memories m ON m.id = {table}.rowid "
                f"WHERE {table} MATCH ? AND {where} ORDER BY rank LIMIT ?"
            )
            rows = self.db.conn.execute(sql, [match, *args, limit]).fetchall()
        return [LexicalHit(int(i), -float(rank)) for i, rank in rows]

    def bm25(self, filters: RecallFilters, query: str, limit: int) -> list[LexicalHit]:
        return self._search(filters, _match_any(content_terms(query)), limit)

    def keywords(self, filters: RecallFilters, query: str, limit: int) -> list[LexicalHit]:
        return self._search(filters, _match_any(keyword_phrases(query)), limit)
