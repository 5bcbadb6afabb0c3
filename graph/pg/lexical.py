"""Lexical search on PostgreSQL: BM25 over each memory's window, phrases over its own text.

``memories.tsv_win`` holds the memory's own text (weight A) and the previous shared memory
of its session (weight B), GIN-indexed. The score is FTS5's ``bm25()``: k1 1.2, b 0.75, idf
``log((N - n + 0.5) / (n + 0.5))`` floored at 1e-6 with n counted in the tenant; the window
score weighs both weights, the own score (``LexicalHit.turn``) weight A only, as SQLite's
``bm25(ftw, 1.0, 0.0)`` does. A window's length is its count of distinct lexemes
(``length(tsv_win)``, kept in the tsvector's header; FTS5 counts tokens, which would cost a
column computed on every write), ``tenant_state.lex_len_sum`` their sum per tenant. Words
found in a large share of a big tenant's rows are dropped first (they weigh nothing and
cost the most), as ``memory_core.recall.lexical`` does on SQLite, and here even when such a
word is the query's only one (the vector branch still answers).

User text never reaches tsquery syntax: words are ``\\w+`` tokens, normalized by the same
SQL function as the rows (``memcore_tsv``), and each resulting lexeme is single-quoted
(its quotes doubled, backslashes escaped); phrases go through ``phraseto_tsquery``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from psycopg import Connection, sql

from graph.api import LexicalHit, RowFilter
from graph.pg.rows import filter_sql

WORD = re.compile(r"\w+", re.UNICODE)
K1, B = 1.2, 0.75
COMMON_MIN_ROWS = 2000
COMMON_SHARE = 0.05

_SCORE = sql.SQL("""
WITH q(lexeme, idf) AS (SELECT * FROM unnest(%s::text[], %s::float8[])),
c AS (SELECT m.id, m.tsv_win, length(m.tsv_win) AS lex_len FROM memories m WHERE m.tsv_win @@ %s::tsquery AND {where}),
s AS (
    SELECT c.id,
           sum(q.idf * (t.a + t.b) * {k1p} / ((t.a + t.b) + {k1} * (1 - {b} + {b} * c.lex_len / %s))) AS win,
           sum(q.idf * t.a * {k1p} / (t.a + {k1} * (1 - {b} + {b} * c.lex_len / %s))) AS own
    FROM c CROSS JOIN LATERAL (
        SELECT x.lexeme, x.a::float8 AS a, (x.n - x.a)::float8 AS b FROM (
            SELECT u.lexeme, cardinality(array_positions(u.weights, 'A')) AS a, cardinality(u.weights) AS n
            -- only the query's lexemes: deleting every other lexeme (ts_delete twice) runs in C
            FROM unnest(ts_delete(c.tsv_win, tsvector_to_array(ts_delete(c.tsv_win, %s::text[])))) AS u) AS x) AS t
    JOIN q ON q.lexeme = t.lexeme
    GROUP BY c.id
)
SELECT id, win, own FROM s ORDER BY {order}, id LIMIT %s
""")


# A tenant too small for pruning (rows <= cap) is scored in one statement: the rows matching any
# lexeme give each lexeme's row count n (the whole tenant, private rows too, as FTS5 counts) and,
# among those the filter admits, the scores.
_ONE_PASS = sql.SQL("""
WITH ql AS (
    SELECT array_agg(u.lexeme) AS lex,
           string_agg({quoted}, ' | ')::tsquery AS q FROM unnest(memcore_tsv(%s)) AS u),
c AS (SELECT m.id, length(m.tsv_win) AS lex_len, ({where}) AS ok, m.tsv_win FROM memories m, ql
      WHERE m.tenant = %s AND m.tsv_win @@ ql.q),
tf AS (
    SELECT c.id, c.ok, c.lex_len, u.lexeme, cardinality(array_positions(u.weights, 'A'))::float8 AS a,
           (cardinality(u.weights) - cardinality(array_positions(u.weights, 'A')))::float8 AS o
    FROM c, ql, unnest(ts_delete(c.tsv_win, tsvector_to_array(ts_delete(c.tsv_win, ql.lex)))) AS u),
idf AS (SELECT lexeme, greatest(ln((%s - count(*) + 0.5) / (count(*) + 0.5)), 1e-6) AS idf FROM tf GROUP BY lexeme),
s AS (
    SELECT tf.id,
           sum(idf.idf * (tf.a + tf.o) * {k1p} / ((tf.a + tf.o) + {k1} * (1 - {b} + {b} * tf.lex_len / %s))) AS win,
           sum(idf.idf * tf.a * {k1p} / (tf.a + {k1} * (1 - {b} + {b} * tf.lex_len / %s))) AS own
    FROM tf JOIN idf USING (lexeme) WHERE tf.ok GROUP BY tf.id)
SELECT id, win, own FROM s ORDER BY {order}, id LIMIT %s
""")
_QUOTED_SQL = r"('''' || replace(replace(u.lexeme, '\', '\\'), '''', '''''') || '''')"

# the lexeme as a quoted tsquery operand, built in SQL exactly as quote_lexeme() does in Python
_PROBE = r"""
SELECT u.lexeme, (SELECT count(*) FROM (
    SELECT 1 FROM memories WHERE tenant = %s
    AND tsv_win @@ ('''' || replace(replace(u.lexeme, '\', '\\'), '''', '''''') || '''')::tsquery LIMIT %s) AS x)
FROM unnest(memcore_tsv(%s)) AS u
"""


def quote_lexeme(lexeme: str) -> str:
    """A tsquery operand that is exactly this lexeme, whatever characters it holds."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def words(texts: Sequence[str]) -> str:
    return " ".join(w for t in texts for w in WORD.findall(t))


def window(conn: Connection[Any], f: RowFilter, terms: Sequence[str], limit: int, *, own: bool,
           rows: int, len_sum: int, min_rows: int = COMMON_MIN_ROWS) -> list[LexicalHit]:
    """BM25 over (text, previous shared text), best first; ``own`` ranks by the own text. A tenant
    of more than ``min_rows`` rows first drops lexemes found in ``COMMON_SHARE`` of them."""
    text = words(terms)
    if not text or limit <= 0 or rows <= 0:
        return []
    cap = max(min_rows, int(rows * COMMON_SHARE))
    where, args = filter_sql(f)
    avgdl = max(len_sum / rows, 1e-9)
    order = sql.SQL("own DESC, win DESC") if own else sql.SQL("win DESC")
    consts = {"k1": sql.Literal(K1), "k1p": sql.Literal(K1 + 1), "b": sql.Literal(B), "order": order, "where": where}
    if rows <= cap:
        query = _ONE_PASS.format(quoted=sql.SQL(_QUOTED_SQL), **consts)
        found = conn.execute(query, [text, *args, f.tenant, float(rows), avgdl, avgdl, limit])
        return [LexicalHit(int(i), float(win), max(0.0, float(own_score))) for i, win, own_score in found]
    # the query's lexemes and, for each, a LIMIT probe of its rows in the tenant (GIN), in one trip
    hits = {str(lexeme): int(n) for lexeme, n in conn.execute(_PROBE, [f.tenant, cap, text])}
    lex = sorted(hits)
    # rows > cap here: a big tenant. Unlike SQLite, a lone common word is dropped too: scoring
    # it would read 5%+ of the tenant's rows (seconds at 1M), for a ranking BM25 barely orders
    lex = [t for t in lex if hits[t] < cap]
    lex = [t for t in lex if hits[t] > 0]
    if not lex:
        return []
    idf = [max(1e-6, math.log((rows - hits[t] + 0.5) / (hits[t] + 0.5))) for t in lex]
    query = _SCORE.format(**consts)
    found = conn.execute(query, [lex, idf, " | ".join(map(quote_lexeme, lex)), *args, avgdl, avgdl, lex, limit])
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


def phrases(conn: Connection[Any], f: RowFilter, texts: Sequence[str], limit: int) -> list[LexicalHit]:
    """Memories whose own text holds any of the phrases (word for word), by ts_rank_cd."""
    cleaned = list(dict.fromkeys(p for p in (words([t]) for t in texts) if p))
    if not cleaned or limit <= 0:
        return []
    where, args = filter_sql(f)
    found = conn.execute(_PHRASES.format(quoted=sql.SQL(_QUOTED_SQL), where=where), [cleaned, *args, limit])
    return [LexicalHit(int(i), float(r), float(r)) for i, r in found]
