"""Lexical retrievers over the tenant's own FTS5 tables: BM25 over each memory's window
(its text plus the previous memory of its session, ``ftw_*``), and keyword phrases over
the memory's own text (``fts_*``) for exact tokens the embedder blurs (ids, code
identifiers, numbers, names).

The indexes and their queries belong to the graph store (``graph.sqlite.lexical``); this
module picks the phrases a query holds and hands over the recall filters.
"""

from __future__ import annotations

import re

from graph.api import LexicalHit, LexicalSearch
from memory_core.recall.filters import RecallFilters

WORD = re.compile(r"\w+", re.UNICODE)
# candidate tokens for keywords; kept when identifier-like (digit, inner '_-.:/#', inner capital)
KEYWORD = re.compile(r"\w[\w.\-:/#]*\w|\w", re.UNICODE)
QUOTED = re.compile(r"\"([^\"]{2,200})\"|'([^']{2,200})'")

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


class LexicalIndex:
    """BM25 and keyword search inside one tenant's lexical indexes (the graph store's), filters inside."""

    def __init__(self, graph: LexicalSearch) -> None:
        self.graph = graph

    def window(self, filters: RecallFilters, terms: list[str], limit: int, own: bool = False) -> list[LexicalHit]:
        """BM25 over (text, previous text), best first; ``turn`` rides along from the same match.
        With ``own``, ranked by the memory's own text instead (what non-dialogue rows key on)."""
        return self.graph.lexical_window(filters, terms, limit, own=own)

    def windows(self, filters: RecallFilters, terms: list[str], limit: int) -> tuple[list[LexicalHit],
                                                                                     list[LexicalHit]]:
        """:meth:`window` and ``window(own=True)`` from one search."""
        return self.graph.lexical_windows(filters, terms, limit)

    def keywords(self, filters: RecallFilters, query: str, limit: int) -> list[LexicalHit]:
        """Exact multi-word phrases (``EXP-30`` → ``"exp 30"``) in the memory's own text."""
        phrases = [p for p in keyword_phrases(query) if " " in p]
        return self.graph.lexical_phrases(filters, phrases, limit)
