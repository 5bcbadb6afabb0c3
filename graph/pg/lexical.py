"""Lexical search on PostgreSQL (:class:`PgLexical`, the store's :class:`graph.api.LexicalSearch`): BM25
over each memory's window, phrases over its own text.

``memories.tsv_win`` holds the memory's own text (weight A) and the previous shared memory
of its session (weight B), GIN-indexed. The score is FTS5's ``bm25()``: k1 1.2, b 0.75, idf
``log((N - n + 0.5) / (n + 0.5))`` floored at 1e-6 with n counted in the tenant; the window
score weighs both weights, the own score (``LexicalHit.turn``) weight A only, as SQLite's
``bm25(ftw, 1.0, 0.0)`` does, with one difference: a word's frequency in a row is 1 per weight
that holds it (0..2 in the window), read by two binary searches in the row's tsvector instead
of unnesting its positions (half the cost per candidate row; turns rarely repeat a word, and
LoCoMo's lexical any@5 / frac@10 stay within 0.01 of FTS5's). A window's length is its count of distinct lexemes
(``length(tsv_win)``, kept in the tsvector's header; FTS5 counts tokens, which would cost a
column computed on every write), ``tenant_state.lex_len_sum`` their sum per tenant. Words
found in a large share of a big tenant's rows are dropped first (they weigh nothing and
cost the most), as ``graph.sqlite.lexical`` does, and here even when such a word is the query's
only one (the vector branch still answers); in a tenant of at least four samples the drop is
decided on the word's share of the newest rows, as on SQLite (:mod:`graph.pg.lexical_sample`).

User text never reaches tsquery syntax: words are ``\\w+`` tokens, normalized by the same
SQL function as the rows (``memcore_tsv``), and each resulting lexeme is single-quoted
(its quotes doubled, backslashes escaped); phrases are built the same way from their lexemes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from psycopg import Connection, sql

from graph.api import LexicalHit, LexicalSearch, RowFilter
from graph.pg.lexical_sample import SampledCounts
from graph.pg.queries import PgQueries
from graph.pg.rows import filter_sql

WORD = re.compile(r"\w+", re.UNICODE)
K1, B = 1.2, 0.75
COMMON_MIN_ROWS = 2000
COMMON_SHARE = 0.05

# the lexeme as a quoted tsquery operand, built in SQL exactly as quote_lexeme() does in Python
_QUOTED_SQL = r"('''' || replace(replace(u.lexeme, '\', '\\'), '''', '''''') || '''')"
_COUNT = r"""(SELECT count(*) FROM (
    SELECT 1 FROM memories WHERE tenant = %s
    AND tsv_win @@ ('''' || replace(replace(u.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery LIMIT %s) AS x)"""
_PROBE = f"SELECT u.lexeme, {_COUNT} FROM unnest(memcore_tsv(%s)) AS u"  # the query's lexemes, counted
_RECOUNT = f"SELECT u.lexeme, {_COUNT} FROM unnest(%s::text[]) AS u(lexeme)"  # lexemes as they are, counted


def quote_lexeme(lexeme: str) -> str:
    """A tsquery operand that is exactly this lexeme, whatever characters it holds."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def words(texts: Sequence[str]) -> str:
    return " ".join(w for t in texts for w in WORD.findall(t))


def _presence_sql(lex: list[str], idf: list[float], where: sql.Composable, order: sql.Composable) -> sql.Composed:
    """The scoring query: per lexeme, two presence tests (weight A, weight B) on each candidate."""
    k1, k1p = sql.Literal(K1), sql.Literal(K1 + 1)
    test = sql.SQL("(m.tsv_win @@ {}::tsquery)::int::float8 AS {}")
    tests = sql.SQL(", ").join(
        sql.SQL(", ").join([test.format(sql.Literal(quote_lexeme(t) + ":A"), sql.Identifier(f"a{i}")),
                            test.format(sql.Literal(quote_lexeme(t) + ":B"), sql.Identifier(f"b{i}"))])
        for i, t in enumerate(lex))
    win = sql.SQL(" + ").join(sql.SQL("{idf} * (t.{a} + t.{b}) * {k1p} / (t.{a} + t.{b} + kk.k)").format(
        idf=sql.Literal(w), a=sql.Identifier(f"a{i}"), b=sql.Identifier(f"b{i}"), k1p=k1p) for i, w in enumerate(idf))
    own = sql.SQL(" + ").join(sql.SQL("{idf} * t.{a} * {k1p} / (t.{a} + kk.k)").format(
        idf=sql.Literal(w), a=sql.Identifier(f"a{i}"), k1p=k1p) for i, w in enumerate(idf))
    return sql.SQL(
        "SELECT id, win, own FROM (SELECT m.id, {win} AS win, {own} AS own FROM memories m "
        "CROSS JOIN LATERAL (SELECT {k1} * (1 - {b} + {b} * length(m.tsv_win) / %s) AS k) AS kk "
        "CROSS JOIN LATERAL (SELECT {tests}) AS t "
        "WHERE m.tsv_win @@ %s::tsquery AND {where}) AS s ORDER BY {order}, id LIMIT %s").format(
        win=win, own=own, k1=k1, b=sql.Literal(B), tests=tests, where=where, order=order)


def window(conn: Connection[Any], f: RowFilter, terms: Sequence[str], limit: int, *, own: bool,
           rows: int, len_sum: int, min_rows: int = COMMON_MIN_ROWS, sampled: SampledCounts | None = None,
           changes: int = 0) -> list[LexicalHit]:
    """BM25 over (text, previous shared text), best first; ``own`` ranks by the own text.

    In a tenant of more than max(``min_rows``, ``COMMON_SHARE`` of its rows) rows, each lexeme is
    first counted by a LIMIT probe of ``min_rows`` rows; when the rare ones (fewer rows) alone
    fill the pool they answer and the common ones are left out, otherwise the common ones are
    counted up to that cap and those above it dropped (as ``graph.sqlite.lexical`` does). In a
    tenant ``sampled`` applies to, the common ones are instead estimated from its newest rows
    (:mod:`graph.pg.lexical_sample`; ``changes`` is the tenant's change clock) and those estimated
    at the cap or over dropped; the others are counted exactly, their idf as exact counting gives it."""
    text = words(terms)
    if not text or limit <= 0 or rows <= 0:
        return []
    cap = max(min_rows, int(rows * COMMON_SHARE))
    big = rows > cap
    # the query's lexemes and, for each, a LIMIT probe of its rows in the tenant (GIN), in one trip
    hits = {str(lexeme): int(n) for lexeme, n in conn.execute(_PROBE, [f.tenant, min_rows if big else cap, text])}
    lex = sorted(hits)
    if big:
        rare = [t for t in lex if hits[t] < min_rows]
        found = _scored(conn, f, rare, hits, limit, own=own, rows=rows, len_sum=len_sum) if len(rare) < len(lex) else []
        common = [t for t in lex if hits[t] >= min_rows]
        if common and sampled is not None and sampled.applies(rows):
            # dropped or kept on an estimate from the newest rows (as SQLite decides); the words kept are
            # counted for their idf, exactly: up to where the idf floors (n > rows / 2), past the cap
            est = sampled.estimates(conn, f.tenant, common, rows=rows, min_rows=min_rows, changes=changes)
            common = [t for t in common if est[t] < cap]
            if common:
                hits |= {str(lexeme): int(n) for lexeme, n in conn.execute(
                    _RECOUNT, [f.tenant, max(cap, rows // 2 + 1), common])}
            mid = sorted(common, key=lambda t: (hits[t], t))
        else:
            if common:
                hits |= {str(lexeme): int(n) for lexeme, n in conn.execute(_RECOUNT, [f.tenant, cap, common])}
            mid = sorted((t for t in common if hits[t] < cap), key=lambda t: (hits[t], t))
        # unlike SQLite, a lone common word is dropped too: scoring it would read 5%+ of the tenant
        if len(found) >= limit:  # the rare lexemes fill the pool: rows holding only common ones are left out
            if not mid:
                return found
            rare_q = " | ".join(quote_lexeme(t) for t in rare if hits[t] > 0)  # each row scored over every lexeme
            return _scored(conn, f, rare + mid, hits, limit, own=own, rows=rows, len_sum=len_sum, match=rare_q)
        if mid:
            return _bounded(conn, f, [t for t in rare if hits[t] > 0], mid, hits, limit, own=own, rows=rows,
                            len_sum=len_sum)
        lex = rare
    return _scored(conn, f, lex, hits, limit, own=own, rows=rows, len_sum=len_sum)


def _bounded(conn: Connection[Any], f: RowFilter, rare: list[str], mid: list[str], hits: dict[str, int],
             limit: int, *, own: bool, rows: int, len_sum: int) -> list[LexicalHit]:
    """The rows ``graph.sqlite.lexical`` scores when mid-frequency lexemes are left (each row's score
    is the same formula over every lexeme, whatever matched it): rows holding a rare lexeme or two
    of them, and when those leave the pool short, the newest ``limit`` rows holding any."""
    lex = rare + mid
    q = [quote_lexeme(t) for t in lex]
    sources = [f"({q[i]} & ({' | '.join(q[i + 1:])}))" for i in range(len(q) - 1)] + q[:len(rare)]
    found = _scored(conn, f, lex, hits, limit, own=own, rows=rows, len_sum=len_sum, match=" | ".join(sources))
    if len(found) >= limit:
        return found
    where, args = filter_sql(f)
    newest = conn.execute(sql.SQL("SELECT min(id) FROM (SELECT m.id FROM memories m WHERE m.tsv_win @@ %s::tsquery "
                                  "AND {} ORDER BY m.id DESC LIMIT %s) AS x").format(where),
                          [" | ".join(q), *args, limit]).fetchone()
    if newest is None or newest[0] is None:
        return found
    more = _scored(conn, f, lex, hits, limit, own=own, rows=rows, len_sum=len_sum, since=int(newest[0]))
    best = {h.id: h for h in [*found, *more]}
    key = (lambda h: h.turn) if own else (lambda h: h.score)
    return sorted(best.values(), key=lambda h: (-key(h), -h.score, h.id))[:limit]


def _scored(conn: Connection[Any], f: RowFilter, lexemes: list[str], hits: dict[str, int], limit: int, *,
            own: bool, rows: int, len_sum: int, match: str | None = None, since: int | None = None,
            ) -> list[LexicalHit]:
    """The ``limit`` best rows for ``lexemes`` (OR, or the tsquery ``match``; with ``since`` only ids
    from it on), each lexeme's IDF from its count in ``hits``."""
    lex = [t for t in lexemes if hits[t] > 0]
    if not lex:
        return []
    where, args = filter_sql(f)
    if since is not None:
        where = sql.SQL("{} AND m.id >= {}").format(where, sql.Literal(since))
    # the tenant's count and the lexemes' counts come from separate statements (READ COMMITTED): adds
    # landing in between can leave a lexeme in more rows than ``rows`` counted, so it counts as all of them
    rows = max(rows, *(hits[t] for t in lex))
    avgdl = max(len_sum / rows, 1e-9)
    order = sql.SQL("own DESC, win DESC") if own else sql.SQL("win DESC")
    idf = [max(1e-6, math.log((rows - hits[t] + 0.5) / (hits[t] + 0.5))) for t in lex]
    query = _presence_sql(lex, idf, where, order)
    found = conn.execute(query, [avgdl, match or " | ".join(map(quote_lexeme, lex)), *args, limit])
    return [LexicalHit(int(i), float(win), max(0.0, float(own_score))) for i, win, own_score in found]


# Each phrase as a tsquery of its lexemes in order, every operand restricted to weight A (the own
# text: the window's B positions come after all of A's, so no match straddles the two), with the
# gaps of the phrase kept as <N> distances; the phrases OR-ed.
_PHRASES = sql.SQL("""
WITH p AS (SELECT body, n FROM unnest(%s::text[]) WITH ORDINALITY AS p(body, n)),
ops AS (
    SELECT p.n, x.lexeme, x.pos, x.pos - lag(x.pos) OVER (PARTITION BY p.n ORDER BY x.pos) AS gap
    FROM p, LATERAL (SELECT u.lexeme, unnest(u.positions) AS pos FROM unnest(memcore_tsv(p.body)) AS u) AS x),
ph AS (
    SELECT n, string_agg(CASE WHEN gap IS NULL THEN '' ELSE ' <' || gap || '> ' END || {quoted} || ':A', ''
                         ORDER BY pos) AS q FROM ops AS u GROUP BY n),
q AS (SELECT string_agg('(' || q || ')', ' | ')::tsquery AS q FROM ph)
SELECT m.id, ts_rank_cd('{{0, 0, 0, 1}}', m.tsv_win, q.q) AS r FROM memories m, q
WHERE m.tsv_win @@ q.q AND {where} ORDER BY r DESC, m.id LIMIT %s
""")


def phrase_hits(conn: Connection[Any], f: RowFilter, texts: Sequence[str], limit: int) -> list[LexicalHit]:
    """Memories whose own text holds any of the phrases (word for word), by ts_rank_cd."""
    cleaned = list(dict.fromkeys(p for p in (words([t]) for t in texts) if p))
    if not cleaned or limit <= 0:
        return []
    where, args = filter_sql(f)
    found = conn.execute(_PHRASES.format(quoted=sql.SQL(_QUOTED_SQL), where=where), [cleaned, *args, limit])
    return [LexicalHit(int(i), float(r), float(r)) for i, r in found]


class PgLexical(LexicalSearch):
    """The store's searches (:class:`graph.api.LexicalSearch`): each reads the tenant's row count, length
    sum and change clock with its search, on one pooled connection; common words of a big tenant are
    estimated by :class:`SampledCounts`, kept per process."""

    def __init__(self, q: PgQueries, min_rows: int = COMMON_MIN_ROWS) -> None:
        self.q = q
        self.min_rows = min_rows  # tenants above max(min_rows, COMMON_SHARE of rows) count their query terms
        self.sampled = SampledCounts()  # tenants of 4x its sample_rows estimate common query words

    @property
    def sample_rows(self) -> int:
        """A tenant of 4x as many rows estimates a common query word's count from this many newest rows."""
        return self.sampled.sample_rows

    @sample_rows.setter
    def sample_rows(self, rows: int) -> None:
        self.sampled.sample_rows = rows

    def forget(self) -> None:
        self.sampled.forget()

    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *,
                       own: bool = False) -> list[LexicalHit]:
        return self.q.run(lambda conn: self._window(conn, f, terms, limit, own), "lexical search")

    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        return self.q.run(lambda conn: (self._window(conn, f, terms, limit, False),
                                        self._window(conn, f, terms, limit, True)), "lexical search")

    def _window(self, conn: Connection[Any], f: RowFilter, terms: Sequence[str], limit: int,
                own: bool) -> list[LexicalHit]:
        state = conn.execute("SELECT memories, lex_len_sum, changes FROM tenant_state WHERE tenant = %s",
                             [f.tenant]).fetchone()
        rows, len_sum, changes = (int(state[0]), int(state[1]), int(state[2])) if state else (0, 0, 0)
        return window(conn, f, list(terms), limit, own=own, rows=rows, len_sum=len_sum, min_rows=self.min_rows,
                      sampled=self.sampled, changes=changes)

    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        return self.q.run(lambda c: phrase_hits(c, f, list(phrases), limit), "lexical search")
