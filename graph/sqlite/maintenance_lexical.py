"""Consistency checks and rebuilds of a tenant's two lexical indexes in SQLite (used by
:class:`graph.sqlite.maintenance.SqliteMaintenance`; callers hold ``db.lock``).

The FTS check compares the tenant's FTS5 index term by term with a scratch index built from
the stored content (``fts5vocab`` instance tables on both), so a row indexed with text other
than the stored content is found, not only a missing or extra row. The window check compares
the window table with ``WINDOW_ROWS_SQL``, its exact expected content, and runs FTS5's
integrity check on it.
"""

from __future__ import annotations

import sqlite3

from graph.maintenance_api import LexicalState, WindowState
from graph.sqlite.db import FTS_TOKENIZE, WINDOW_ROWS_SQL, GraphDB, fts_table_name, window_table_name
from graph.sqlite.errors import sqlite_kind

_SCRATCH = ("doctor_expected_v", "doctor_actual_v", "doctor_expected")


def lexical_state(db: GraphDB, tenant: str) -> LexicalState:
    conn = db.conn
    row = conn.execute("SELECT name FROM fts_tables WHERE tenant = ?", (tenant,)).fetchone()
    if row is None:
        return LexicalState("missing", None)
    name = str(row[0])
    if name != fts_table_name(tenant):
        return LexicalState("foreign", name)
    indexed = frozenset(int(r[0]) for r in conn.execute(f"SELECT id FROM {name}_docsize"))
    return LexicalState("ok", name, indexed, frozenset(_differing_docs(conn, tenant, name)))


def _differing_docs(conn: sqlite3.Connection, tenant: str, name: str) -> set[int]:
    """Doc ids whose indexed terms differ from a scratch index of the stored content."""
    try:
        _drop_scratch(conn)
        conn.execute(f"CREATE VIRTUAL TABLE temp.doctor_expected USING fts5(content, tokenize='{FTS_TOKENIZE}')")
        conn.execute("INSERT INTO temp.doctor_expected (rowid, content) SELECT id, content FROM main.memories "
                     "WHERE tenant = ?", (tenant,))
        conn.execute("CREATE VIRTUAL TABLE temp.doctor_expected_v USING fts5vocab(temp, 'doctor_expected', 'instance')")
        conn.execute(f"CREATE VIRTUAL TABLE temp.doctor_actual_v USING fts5vocab(main, '{name}', 'instance')")
        actual = "SELECT term, doc, col, offset FROM temp.doctor_actual_v"
        expected = "SELECT term, doc, col, offset FROM temp.doctor_expected_v"
        rows = conn.execute(
            f"SELECT doc FROM ({actual} EXCEPT {expected}) UNION SELECT doc FROM ({expected} EXCEPT {actual})"
        ).fetchall()
        return {int(r[0]) for r in rows}
    finally:
        _drop_scratch(conn)


def _drop_scratch(conn: sqlite3.Connection) -> None:
    for table in _SCRATCH:
        conn.execute(f"DROP TABLE IF EXISTS temp.{table}")


def window_state(db: GraphDB, tenant: str) -> WindowState:
    conn = db.conn
    name = window_table_name(tenant)
    expected = {int(r[0]): (r[1], r[2]) for r in conn.execute(WINDOW_ROWS_SQL, (tenant,))}
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (name,)).fetchone() is None:
        return WindowState(False, missing=frozenset(expected))
    actual = {int(r[0]): (r[1], r[2]) for r in conn.execute(f"SELECT rowid, content, prev FROM {name}")}
    try:
        conn.execute(f"INSERT INTO {name} ({name}) VALUES ('integrity-check')")
    except sqlite3.DatabaseError as exc:
        kind = sqlite_kind(exc)
        if kind == "corrupt":
            return WindowState(True, damaged=f"{getattr(exc, 'sqlite_errorname', None) or 'corrupt'}: {exc}")
        if kind != "read_only":  # a read-only store is still compared row by row
            raise
    return WindowState(
        True,
        extra=frozenset(actual.keys() - expected.keys()),
        missing=frozenset(expected.keys() - actual.keys()),
        differing=frozenset(i for i in expected.keys() & actual.keys() if expected[i] != actual[i]),
    )


def rebuild_lexical(db: GraphDB, tenant: str) -> None:
    """Re-index the tenant's own rows: delete-all, then insert each memory's content; the window
    is rebuilt from ``WINDOW_ROWS_SQL`` in the same transaction. (FTS5 ``rebuild`` on the shared
    external-content table would index every tenant's rows, so it is never used.)"""
    try:
        with db.transaction() as cur:
            name = db.fts_table(cur, tenant, create=True)
            cur.execute(f"INSERT INTO {name}({name}) VALUES ('delete-all')")
            cur.execute(f"INSERT INTO {name}(rowid, content) SELECT id, content FROM memories WHERE tenant = ?",
                        (tenant,))
            db.rebuild_window(cur, tenant)
    except BaseException:
        db.reload_fts_names()  # the rolled-back transaction may have dropped or created tables
        raise
