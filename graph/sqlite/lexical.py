"""The SQLite store's :class:`graph.api.LexicalSearch`: BM25 and phrase search in one tenant's FTS5
tables, with row filters inside the SQL.

``ftw_*`` holds each memory's window (its text and the previous shared memory of its
session), ``fts_*`` its own text. Terms reach FTS5 only double-quoted: operators such as
``NEAR``, ``*`` or ``:`` in user text are just words. Called under the store's lock.

Cost in a big tenant: FTS5 scores every row an OR matches (~4 us a row for two ``bm25()``
calls, plus a pass over each term's whole doclist for its IDF), so a term found in 40k of 1M
rows costs ~190 ms whatever the LIMIT. Each term is first counted by a LIMIT probe of at most
``min_rows`` rows. When the query's rare terms (fewer rows than that) alone fill the pool,
the pool is theirs and the common terms are left out: a common term's IDF is below every rare
term's, so a row holding only common terms ranks under the rows holding a rare one unless it
holds several of them, and the cost stays proportional to the rare terms' rows. Otherwise the
common terms are counted up to ``COMMON_SHARE`` of the rows and those above it dropped (BM25
gives them almost no weight); when every term is that common the branch returns nothing (the
vector branch still answers). The terms left under that cap are not scored on every row that
holds one (thousands): only the rows holding a rare term or two of the terms, then the newest
rows holding one (:meth:`SqliteLexical._bounded`), each with its whole-OR score.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from graph.api import LexicalHit, LexicalSearch, RowFilter
from graph.node_cache import LRU
from graph.sqlite.db import GraphDB
from graph.sqlite.errors import sqlite_errors

if TYPE_CHECKING:
    from graph.sqlite.txn import Effects

COMMON_MIN_ROWS = 2000
COMMON_SHARE = 0.05
PROBES_KEPT = 4096
SAMPLE_ROWS = 20_000  # the newest rows a common term's share is counted in (tenants of 4x as many rows)


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
    parts.append("m.archived_us IS NULL")  # out of recall: never a place in the pool (retention, consolidation)
    return " AND ".join(parts), args


class SqliteLexical(LexicalSearch):
    """The store's searches (:class:`graph.api.LexicalSearch`). It counts each tenant's memory writes and
    erasures in this process (the clock of the kept estimates) as the store tells it its commits."""

    def __init__(self, db: GraphDB, min_rows: int = COMMON_MIN_ROWS, sample_rows: int = SAMPLE_ROWS) -> None:
        self.db = db
        self.min_rows = min_rows  # tenants above max(min_rows, COMMON_SHARE of rows) count their query terms
        self.sample_rows = sample_rows  # tenants of 4x as many rows estimate common terms from their newest rows
        self._changes: dict[str, int] = {}  # tenant -> memories written or erased in this process
        self._probes: LRU[tuple[str, str, int], tuple[int, int]] = LRU(PROBES_KEPT)
        self._samples: LRU[str, tuple[int, int, int]] = LRU(PROBES_KEPT)  # table -> (first rowid, rows, changes)

    def committed(self, fx: Effects) -> None:
        for tenant, _mem_id in fx.erased:
            self._changes[tenant] = self._changes.get(tenant, 0) + 1
        for node in fx.written:
            self._changes[node.tenant] = self._changes.get(node.tenant, 0) + 1

    def forget(self) -> None:
        self._probes.clear()
        self._samples.clear()

    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *, own: bool = False) -> list[LexicalHit]:
        with sqlite_errors():  # on a snapshot of its own, beside the writer (graph.sqlite.readers)
            return self._search(self.db.window_table(None, f.tenant, create=False), f, list(terms), limit,
                                window=True, own=own)

    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        """``lexical_window(own=False)`` and ``(own=True)`` from one search: each matched row is scored
        once with both bm25() weightings, then ranked twice (half the FTS5 work of two searches)."""
        with sqlite_errors():
            both = self._search(self.db.window_table(None, f.tenant, create=False), f, list(terms), limit,
                                window=True, own=None)
        return (sorted(both, key=lambda h: (-h.score, h.id))[:limit],
                sorted(both, key=lambda h: (-h.turn, h.id))[:limit])

    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        with sqlite_errors():
            return self._search(self.db.fts_table(None, f.tenant, create=False), f, list(phrases), limit,
                                window=False)

    def _search(self, table: str | None, f: RowFilter, terms: list[str], limit: int, window: bool,
                own: bool | None = False) -> list[LexicalHit]:
        """On a snapshot of the pool (:mod:`graph.sqlite.readers`): no lock shared with the writer."""
        if table is None or not terms or limit <= 0:
            return []
        changes = self._changes.get(f.tenant, 0)  # before the snapshot: its counts hold at least these changes
        with self.db.readers.snapshot() as conn:
            present = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))
            if present.fetchone() is None:
                return []  # created by a transaction not committed yet: none of its rows are either
            row = conn.execute("SELECT n FROM counts WHERE tenant = ? AND scope = 'all' AND key = ''",
                               (f.tenant,)).fetchone()
            return _Search(conn, self, changes).run(table, f, terms, limit, 0 if row is None else int(row[0]),
                                                    window, own)


class _Search:
    """One search on one snapshot connection."""

    def __init__(self, conn: sqlite3.Connection, owner: SqliteLexical, changes: int) -> None:
        self.conn = conn
        self.min_rows = owner.min_rows
        self._probes = owner._probes
        self._samples = owner._samples
        self.sample_rows = owner.sample_rows
        self._changes = changes

    def run(self, table: str, f: RowFilter, terms: list[str], limit: int, tenant_rows: int,
            window: bool, own: bool | None) -> list[LexicalHit]:
        """``own``: ranked by the own-text score; False: by the window's; None: both (the union of the
        two top-``limit`` lists, each row with both scores)."""
        cap = max(self.min_rows, int(tenant_rows * COMMON_SHARE))
        if tenant_rows <= cap or len(terms) == 1:
            return self._ranked(table, f, terms, limit, window, own)
        # a big tenant: each term's rows counted by a probe of at most min_rows rows
        counts = self._counts(table, f.tenant, terms, self.min_rows)
        rare = [t for t in terms if counts[t] < self.min_rows]
        if len(rare) == len(terms):  # every term is rare: the whole OR costs little
            return self._ranked(table, f, terms, limit, window, own)
        found = self._ranked(table, f, rare, limit, window, own) if rare else []
        # the common terms are counted up to cap (or estimated from the newest rows) and those in a
        # large share of the rows dropped
        others = [t for t in terms if t not in rare]
        common = (self._estimates(table, others, tenant_rows) if tenant_rows >= 4 * self.sample_rows
                  else self._counts(table, f.tenant, others, cap))
        mid = sorted((t for t in terms if t not in rare and common[t] < cap), key=lambda t: common[t])
        if not mid:  # the rare terms' rows, if any
            return found
        # when the rare terms fill the pool, rows holding only common ones are left out; the rare
        # rows that also hold a common one still get their whole score
        return self._bounded(table, f, rare, mid, found, limit, window, own, rare_only=len(found) >= limit)

    def _bounded(self, table: str, f: RowFilter, rare: list[str], mid: list[str], found: list[LexicalHit],
                 limit: int, window: bool, own: bool | None, rare_only: bool = False) -> list[LexicalHit]:
        """The best rows for ``rare + mid`` without scoring every row holding a mid term (thousands).

        Each source below scores its rows exactly as the whole OR would (bm25() counts only the
        phrases a row matches, each once), so a row's best score over the sources is its score:
        ``found``, the rows holding a rare term; for each term (rarest first) the rows holding it
        and a later one (every row with two or more terms, FTS5 seeking the rarer doclist into the
        others); when those leave the pool short, the newest ``limit`` rows holding any term. With
        ``rare_only`` (the rare terms' rows fill the pool) only the rows holding a rare term."""
        terms = rare + mid
        best: dict[int, LexicalHit] = {h.id: h for h in found}
        key = (lambda h: h.turn) if own else (lambda h: h.score)

        def keep(hits: list[LexicalHit]) -> None:
            for h in hits:
                if h.id not in best or key(h) > key(best[h.id]):
                    best[h.id] = h

        for i, term in enumerate(terms[:len(rare) if rare_only else -1]):
            rest = " OR ".join(f'"{t}"' for t in terms[i + 1:])
            keep(self._ranked(table, f, terms, limit, window, own, match=f'"{term}" AND ({rest})'))
        if len(best) < limit and not rare_only:
            where, args = sql_where(f) if f.selective else ("m.archived_us IS NULL", [])
            since = self.conn.execute(
                f"SELECT min(id) FROM (SELECT m.id FROM {table} JOIN memories m ON m.id = {table}.rowid "
                f"WHERE {table} MATCH ? AND {where} ORDER BY {table}.rowid DESC LIMIT ?)",
                [_match_any(terms), *args, limit]).fetchone()[0]
            if since is not None:
                keep(self._ranked(table, f, terms, limit, window, own, since=int(since)))
        if own is None:  # a row's two scores are the same in every source: the union of both top lists
            tops = {h.id: h for k in (lambda h: h.score, lambda h: h.turn)
                    for h in sorted(best.values(), key=lambda h: (-k(h), h.id))[:limit]}
            return list(tops.values())
        return sorted(best.values(), key=lambda h: (-key(h), h.id))[:limit]

    def _ranked(self, table: str, f: RowFilter, terms: list[str], limit: int, window: bool, own: bool | None,
                match: str | None = None, since: int | None = None) -> list[LexicalHit]:
        """The ``limit`` best rows for ``terms`` (OR; or the ``match`` expression over them), scored
        by FTS5's bm25(); with ``since``, only rows from that rowid on."""
        # two bm25() calls per matched row at most: each one costs a pass over the row's postings
        if own:  # ranked by the own-text score; the window score rides along
            ranks = f"bm25({table}, 1.0, 0.0) AS rank, bm25({table}, 1.0, 1.0)"
        elif window:
            ranks = f"bm25({table}, 1.0, 1.0) AS rank, bm25({table}, 1.0, 0.0)"
        else:
            ranks = f"bm25({table}) AS rank, 0.0"
        rowid = f"{table}.rowid"
        after = "" if since is None else f" AND {rowid} >= {int(since)}"
        if own is None:
            return self._ranked_both(table, f, limit, match or _match_any(terms), after)
        if f.selective:
            where, args = sql_where(f)
            sql = (f"SELECT m.id, {ranks} FROM {table} JOIN memories m ON m.id = {rowid} "
                   f"WHERE {table} MATCH ?{after} AND {where} ORDER BY rank LIMIT ?")
        else:  # the table holds only this tenant's rows; visibility is checked on the memory node
            sql = f"SELECT rowid, {ranks} FROM {table} WHERE {table} MATCH ?{after} ORDER BY rank LIMIT ?"
            args = []
        if f.selective:
            rows = self.conn.execute(sql, [match or _match_any(terms), *args, limit]).fetchall()
        else:
            rows = self._unarchived(lambda n: self.conn.execute(sql, [match or _match_any(terms), n]).fetchall(),
                                    limit, (1,))
        if own:  # (id, own, window)
            return [LexicalHit(int(i), -float(win), max(0.0, -float(rank))) for i, rank, win in rows]
        if window:  # (id, window, own)
            return [LexicalHit(int(i), -float(rank), max(0.0, -float(turn))) for i, rank, turn in rows]
        return [LexicalHit(int(i), -float(rank), -float(rank)) for i, rank, _zero in rows]

    def _ranked_both(self, table: str, f: RowFilter, limit: int, match: str, after: str) -> list[LexicalHit]:
        """The top ``limit`` by the window score and by the own-text score, from one scoring pass."""
        join, where = "", ""
        args: list[Any] = []
        if f.selective:
            clause, args = sql_where(f)
            join, where = f" JOIN memories m ON m.id = {table}.rowid", f" AND {clause}"
        query = (f"WITH s AS MATERIALIZED (SELECT {table}.rowid AS id, bm25({table}, 1.0, 1.0) AS w, "
                 f"bm25({table}, 1.0, 0.0) AS o FROM {table}{join} WHERE {table} MATCH ?{after}{where}) "
                 "SELECT id, w, o FROM (SELECT id, w, o FROM s ORDER BY w LIMIT ?) "
                 "UNION SELECT id, w, o FROM (SELECT id, w, o FROM s ORDER BY o LIMIT ?)")
        if f.selective:
            rows = self.conn.execute(query, [match, *args, limit, limit]).fetchall()
        else:
            rows = self._unarchived(lambda n: self.conn.execute(query, [match, n, n]).fetchall(), limit, (1, 2))
        return [LexicalHit(int(i), -float(w), max(0.0, -float(o))) for i, w, o in rows]

    def _unarchived(self, search: Callable[[int], list[Any]], limit: int, scores: tuple[int, ...]) -> list[Any]:
        """The best ``limit`` rows by each of ``scores`` (columns of ``search(n)``'s rows, which are the best
        ``n`` by each, ids first) that are not archived. Without a selective filter the FTS table is read
        alone (joining ``memories`` for every matched row cost 3.6 ms against 2.0 at 100k rows), so the
        archived rows it returns are dropped here and the search asked again for more while they leave
        fewer than ``limit``: a store without archived rows pays one primary-key probe of its hits."""
        def by(rows: list[Any], column: int) -> list[Any]:
            return sorted(rows, key=lambda r: (r[column], r[0]))

        n = limit
        while True:
            rows = search(n)
            gone = self._archived([int(r[0]) for r in rows])
            if not gone:
                return rows
            kept = [r for r in rows if int(r[0]) not in gone]
            tops = [by(rows, c)[:n] for c in scores]
            if len(rows) < n or all(sum(1 for r in top if int(r[0]) not in gone) >= limit for top in tops):
                best = {int(r[0]): r for c in scores for r in by(kept, c)[:limit]}
                return by(list(best.values()), scores[0])
            n *= 2

    def _archived(self, ids: list[int]) -> set[int]:
        """Which of ``ids`` are archived (out of recall: retention, consolidation's merged members)."""
        out: set[int] = set()
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            out.update(int(r[0]) for r in self.conn.execute(
                f"SELECT id FROM memories WHERE id IN ({','.join('?' * len(chunk))}) AND archived_us IS NOT NULL",
                chunk))
        return out

    def _estimates(self, table: str, terms: list[str], tenant_rows: int) -> dict[str, int]:
        """Rows holding each term, estimated from its share of the newest ``sample_rows`` rows (counted
        up to a little past ``COMMON_SHARE`` of them: past it the term is dropped whatever its count).
        Kept until the tenant has changed a tenth of ``sample_rows`` memories since."""
        refresh = max(1, self.sample_rows // 10)
        start, sampled = self._sample(table, refresh)
        stop = int(sampled * COMMON_SHARE) + max(16, int(sampled * COMMON_SHARE) // 8)
        out = {}
        for term in terms:
            key = (table, term, -1)  # -1: an estimate, apart from the exact counts' caps
            kept = self._probes.get(key)
            if kept is not None and self._changes - kept[1] < refresh:
                out[term] = kept[0]
                continue
            held = int(self.conn.execute(
                f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? AND rowid >= ? LIMIT ?)",
                (f'"{term}"', start, stop)).fetchone()[0])
            out[term] = max(self.min_rows, round(held / max(1, sampled) * tenant_rows))  # not rare: probed so
            self._probes.put(key, (out[term], self._changes))
        return out

    def _sample(self, table: str, refresh: int) -> tuple[int, int]:
        """(first rowid, rows) of the table's newest ``sample_rows`` rows (the docsize shadow table has
        one small entry a row, in rowid order)."""
        kept = self._samples.get(table)
        if kept is not None and self._changes - kept[2] < refresh:
            return kept[0], kept[1]
        docsize = f'"{table}_docsize"'
        row = self.conn.execute(f"SELECT id FROM {docsize} ORDER BY id DESC LIMIT 1 OFFSET ?",
                                (self.sample_rows - 1,)).fetchone()
        start = int(row[0]) if row is not None else 0
        rows = int(self.conn.execute(f"SELECT count(*) FROM {docsize} WHERE id >= ?", (start,)).fetchone()[0])
        self._samples.put(table, (start, rows, self._changes))
        return start, rows

    def _counts(self, table: str, tenant: str, terms: list[str], cap: int) -> dict[str, int]:
        """Rows holding each term, counted by a LIMIT probe (~0.2 ms a thousand rows) up to a little
        over ``cap``, each on the same side of ``cap`` as a fresh probe's.

        A count is remembered with the tenant's memory changes (writes and erasures) seen by then.
        One change moves a term's row count by 2 at most (the row's own window and the next one's),
        so a count ``c`` taken ``n`` changes ago is reused while ``c + 2n < cap`` or ``c - 2n >= cap``
        (the probe reads ``cap // 8`` rows past ``cap`` for the second), else counted again."""
        changes = self._changes
        margin = max(16, cap // 8)
        out = {}
        for term in terms:
            key = (table, term, cap)
            kept = self._probes.get(key)
            if kept is not None:
                count, then = kept
                drift = 2 * (changes - then)
                if count + drift < cap or count - drift >= cap:
                    out[term] = count
                    continue
            count = int(self.conn.execute(
                f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
                (f'"{term}"', cap + margin)).fetchone()[0])
            self._probes.put(key, (count, changes))
            out[term] = count
        return out
