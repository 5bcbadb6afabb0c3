"""The graph's durable store: one SQLite database in WAL mode.

It holds the AGENT_MEMORY rows (with their content, so a lost vector record can be
rebuilt), the other graph nodes and edges, an intent journal for crash recovery, the
idempotency keys and, per tenant, two FTS5 indexes: ``fts_*`` over each memory's content
(external content on ``memories``) and ``ftw_*``, the lexical window (content plus the
previous memory of the session, see ``WINDOW_ROWS_SQL``). Everything one memory needs is
written in a single SQLite transaction, so the graph side of an add is all-or-nothing.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from graph.errors import SchemaVersionError
from graph.sqlite.migrations import (
    MIGRATIONS,
    SCHEMA_V1,
    SCHEMA_VERSION,
    run_script,
)
from graph.sqlite.readers import ReaderPool

__all__ = ["FTS_TOKENIZE", "WINDOW_ROWS_SQL", "GraphDB", "fts_table_name", "window_table_name"]


def fts_table_name(tenant: str) -> str:
    return "fts_" + hashlib.sha256(tenant.encode()).hexdigest()[:24]


def window_table_name(tenant: str) -> str:
    return "ftw_" + hashlib.sha256(tenant.encode()).hexdigest()[:24]


FTS_TOKENIZE = "porter unicode61 remove_diacritics 2"

# The lexical window of a memory: its own content and the content of the memory right before
# it in the same tenant and session (by timestamp, then id), if that one is shared
# (visibility 'tenant'; a private predecessor contributes nothing). Questions are often
# answered in the reply to the turn that carries the topic, so BM25 over the pair finds it.
# This is the exact expected content of every window table: writes keep it (see
# graph.sqlite.txn), rebuilds and checks use this query.
WINDOW_ROWS_SQL = """
SELECT id, content, coalesce(lag(CASE WHEN visibility = 'tenant' THEN content ELSE '' END)
       OVER (PARTITION BY session ORDER BY ts_us, id), '') AS prev
FROM memories WHERE tenant = ?
"""


class GraphDB:
    """A SQLite connection shared by the service's threads under one lock.

    ``write_guard``, when set, runs before every write transaction begins (the service checks
    there that it still owns the data directory); whatever it raises aborts the write.
    A failing open closes the connection before the error propagates.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.lock = threading.RLock()
        self.write_guard: Callable[[], None] | None = None
        self._fts_known: dict[str, str] = {}
        self._windows_known: set[str] = set()
        self.readers = ReaderPool(self.path)  # recall's parallel reads (graph.sqlite.readers)
        self._conn = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0
        )
        try:
            self._open()
        except BaseException:
            self._conn.close()
            raise

    def _open(self) -> None:
        self._conn.row_factory = sqlite3.Row
        with self.lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=OFF")
            self._migrate()
            self._init_meta()
            for row in self._conn.execute("SELECT tenant, name FROM fts_tables"):
                self._fts_known[row["tenant"]] = row["name"]
            self._migrate_windows()

    def _stored_version(self) -> int | None:
        present = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").fetchone()
        if present is None:
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return None if row is None else int(row[0])

    def _migrate(self) -> None:
        """Create a new store, or upgrade an older one step by step, in one transaction.

        A store written by a newer memory-core is refused: its tables may mean more than this
        version knows, and writing them could lose that."""
        version = self._stored_version()
        if version is not None and version > SCHEMA_VERSION:
            raise SchemaVersionError(version, SCHEMA_VERSION)
        if version == SCHEMA_VERSION:
            return
        with self.transaction() as cur:
            if version is None:
                run_script(cur, SCHEMA_V1)
            for step_version, step in MIGRATIONS:
                if (version or 1) < step_version:
                    step(cur, version is None)
            cur.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))

    def _init_meta(self) -> None:
        with self.transaction() as cur:
            cur.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('next_id', '1')")
            cur.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('cursor_secret', ?)", (secrets.token_hex(32),)
            )

    @property
    def conn(self) -> sqlite3.Connection:
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Cursor]:
        """BEGIN IMMEDIATE … COMMIT, rolled back on any exception."""
        with self.lock:
            if self.write_guard is not None:
                self.write_guard()
            cur = self._conn.cursor()
            cur.execute("BEGIN IMMEDIATE")
            try:
                yield cur
            except BaseException:
                if self._conn.in_transaction:  # SQLITE_FULL, IOERR, BUSY may have rolled it back already
                    cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    def meta(self, key: str) -> str | None:
        with self.lock:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def allocate_ids(self, cur: sqlite3.Cursor, n: int) -> list[int]:
        """Ids come from one sequence shared by memories and episodes (refs carry the kind)."""
        first = int(cur.execute("SELECT value FROM meta WHERE key = 'next_id'").fetchone()[0])
        cur.execute("UPDATE meta SET value = ? WHERE key = 'next_id'", (str(first + n),))
        return list(range(first, first + n))

    def id_in_use(self, cur: sqlite3.Cursor, item_id: int) -> bool:
        """True when a memory, an episode or a pending journal entry holds this id."""
        for table in ("memories", "episodes", "entities"):
            if cur.execute(f"SELECT 1 FROM {table} WHERE id = ?", (item_id,)).fetchone():
                return True
        refs = (f"mem:{item_id}", f"ep:{item_id}")
        return cur.execute("SELECT 1 FROM journal WHERE item_id IN (?, ?)", refs).fetchone() is not None

    def reserve_ids_through(self, cur: sqlite3.Cursor, item_id: int) -> None:
        """Move the sequence past an id an import kept, so fresh ids never collide with it."""
        cur.execute(
            "UPDATE meta SET value = CAST(MAX(CAST(value AS INTEGER), ?) AS TEXT) WHERE key = 'next_id'",
            (item_id + 1,),
        )

    def fts_table(self, cur: sqlite3.Cursor | None, tenant: str, *, create: bool) -> str | None:
        """The tenant's own FTS5 table (external content over ``memories``): BM25 statistics
        and matches never mix tenants."""
        name = self._fts_known.get(tenant)
        if name is not None or not create:
            return name
        if cur is None:
            raise ValueError("creating a tenant's FTS table needs the writer's cursor")
        name = fts_table_name(tenant)
        cur.execute(
            f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5("
            f"content, content='memories', content_rowid='id', tokenize='{FTS_TOKENIZE}')"
        )
        cur.execute("INSERT OR IGNORE INTO fts_tables (tenant, name) VALUES (?, ?)", (tenant, name))
        self._fts_known[tenant] = name
        self.window_table(cur, tenant, create=True)
        return name

    def window_table(self, cur: sqlite3.Cursor | None, tenant: str, *, create: bool) -> str | None:
        """The tenant's lexical window table ``(content, prev)``: an FTS5 table that keeps its
        own copy of the text, so a row is deleted or re-pointed by rowid alone."""
        name = window_table_name(tenant)
        if tenant in self._windows_known:
            return name
        if not create:
            return None
        if cur is None:
            raise ValueError("creating a tenant's window table needs the writer's cursor")
        cur.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {name} USING fts5(content, prev, tokenize='{FTS_TOKENIZE}')")
        self._windows_known.add(tenant)
        return name

    def rebuild_window(self, cur: sqlite3.Cursor, tenant: str) -> str:
        """Re-index the tenant's window table from ``memories`` (recovery, doctor, migration)."""
        name = window_table_name(tenant)
        cur.execute(f"DROP TABLE IF EXISTS {name}")
        self._windows_known.discard(tenant)
        self.window_table(cur, tenant, create=True)
        cur.execute(f"INSERT INTO {name} (rowid, content, prev) {WINDOW_ROWS_SQL}", (tenant,))
        return name

    def _migrate_windows(self) -> None:
        """Stores written before window tables existed get them built once, at open."""
        present = {str(r[0]) for r in self._conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ftw%'")}
        missing = [t for t in self._fts_known if window_table_name(t) not in present]
        self._windows_known = {t for t in self._fts_known if window_table_name(t) in present}
        if missing:
            with self.transaction() as cur:
                for tenant in missing:
                    self.rebuild_window(cur, tenant)

    def reload_fts_names(self) -> None:
        self.readers.reset()
        with self.lock:
            self._fts_known = {
                row["tenant"]: row["name"] for row in self._conn.execute("SELECT tenant, name FROM fts_tables")
            }
            present = {str(r[0]) for r in self._conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'ftw%'")}
            self._windows_known = {t for t in self._fts_known if window_table_name(t) in present}

    def close(self) -> None:
        self.readers.close()
        with self.lock:
            self._conn.close()
