"""Consistency checks and the rebuild of a tenant's lexical index on PostgreSQL (used by
:class:`graph.pg.maintenance.PgMaintenance`).

On PostgreSQL both lexical "indexes" of SQLite live on the memory row itself: ``prev`` is the
window's text (the previous shared memory of the session) and the stored generated column
``tsv_win`` is the indexed tsvector (own text weight A, ``prev`` weight B), searched through
one GIN index shared by every tenant (``memories_lexical``). So:

- :func:`lexical_state` compares each row's stored ``tsv_win`` with what ``memcore_tsv`` makes
  of its content and ``prev`` *now* (they part when the text search configuration or a
  dictionary changed after the rows were written); a missing GIN index is ``"missing"``;
- :func:`window_state` compares each row's ``prev`` with what the rows imply (the same ``lag``
  as ``graph.sqlite.db.WINDOW_ROWS_SQL``), and reports an invalid GIN index as ``damaged``;
- :func:`rebuild` rewrites the tenant's differing rows (which recomputes ``tsv_win``), recreates
  a missing GIN index or reindexes an invalid one (both are table-wide: the index is shared),
  and recounts the tenant's lexical length sum.
"""

from __future__ import annotations

from typing import Any

from psycopg import Connection

from graph.maintenance_api import LexicalState, WindowState
from graph.pg.migrations import LEXICAL_INDEX, create_lexical_index

# each memory's expected window text: the previous shared memory of its session by (ts_us, id)
_EXPECTED = ("SELECT id, coalesce(lag(CASE WHEN visibility = 'tenant' THEN content ELSE '' END) "
             "OVER (PARTITION BY session ORDER BY ts_us, id), '') AS prev FROM memories WHERE tenant = %s")
_RECOMPUTED = "setweight(memcore_tsv({t}.content), 'A') || setweight(memcore_tsv({t}.prev), 'B')"


def _index(conn: Connection[Any]) -> tuple[bool, bool]:
    """(exists, valid) of the lexical GIN index in the current schema."""
    row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)",
                       [LEXICAL_INDEX]).fetchone()
    return (False, False) if row is None else (True, bool(row[0]))


def lexical_state(conn: Connection[Any], tenant: str) -> LexicalState:
    exists, _valid = _index(conn)
    if not exists:
        return LexicalState("missing", None)
    rows = conn.execute(f"SELECT m.id, m.tsv_win IS DISTINCT FROM {_RECOMPUTED.format(t='m')} FROM memories m "
                        "WHERE m.tenant = %s", [tenant]).fetchall()
    return LexicalState("ok", LEXICAL_INDEX, frozenset(int(r[0]) for r in rows),
                        frozenset(int(r[0]) for r in rows if r[1]))


def window_state(conn: Connection[Any], tenant: str) -> WindowState:
    exists, valid = _index(conn)
    if exists and not valid:
        return WindowState(True, damaged=f"the GIN index {LEXICAL_INDEX} is marked invalid (indisvalid false)")
    rows = conn.execute(f"SELECT m.id FROM memories m JOIN ({_EXPECTED}) w ON w.id = m.id "
                        "WHERE m.prev IS DISTINCT FROM w.prev", [tenant]).fetchall()
    return WindowState(True, differing=frozenset(int(r[0]) for r in rows))


def rebuild(conn: Connection[Any], tenant: str) -> int:
    """Re-derive the tenant's windows and tsvectors inside the caller's transaction (which must
    move the tenant's version); returns how many rows were rewritten. The tenant's sessions are
    locked as writers lock them (graph.pg.txn), so no add re-points a window meanwhile."""
    for (session,) in conn.execute("SELECT DISTINCT session FROM memories WHERE tenant = %s ORDER BY session",
                                   [tenant]).fetchall():
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", [f"win\x1f{tenant}\x1f{session}"])
    exists, valid = _index(conn)
    if not exists:
        with conn.cursor() as cur:
            create_lexical_index(cur)
    elif not valid:
        conn.execute(f"REINDEX INDEX {LEXICAL_INDEX}")
    rewritten = conn.execute(
        f"UPDATE memories m SET prev = w.prev FROM ({_EXPECTED}) w WHERE m.id = w.id AND m.tenant = %s AND "
        f"(m.prev IS DISTINCT FROM w.prev OR m.tsv_win IS DISTINCT FROM {_RECOMPUTED.format(t='m')}) RETURNING m.id",
        [tenant, tenant]).fetchall()
    # the rewritten rows move the lexical sample's clock too: estimates taken before are refreshed
    conn.execute("UPDATE tenant_state SET lex_len_sum = (SELECT coalesce(sum(length(tsv_win)), 0) FROM memories "
                 "WHERE tenant = %s), changes = changes + %s WHERE tenant = %s", [tenant, len(rewritten), tenant])
    return len(rewritten)
