""":class:`graph.maintenance_api.GraphMaintenance` over one SQLite :class:`graph.sqlite.db.GraphDB`.

Every method takes ``db.lock`` itself (writes go through ``db.transaction``, so the service's
write guard runs first) and raises :class:`graph.api.GraphStoreError` for any SQLite or OS
failure. The lexical checks live in :mod:`graph.sqlite.maintenance_lexical`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from graph import maintenance_checks as checks
from graph.api import (
    MEMORY_COLUMNS,
    EpisodeNode,
    JournalEntry,
    MemoryRecord,
)
from graph.maintenance_api import (
    DanglingEdge,
    DiskUse,
    EdgeRow,
    IdSpace,
    LexicalState,
    MissingStructure,
    NodeRow,
    WindowState,
)
from graph.sqlite import maintenance_lexical as lexical
from graph.sqlite.db import GraphDB
from graph.sqlite.errors import store_errors
from graph.sqlite.migrations import COUNT_SCOPES_SQL
from graph.sqlite.rows import EPISODE_COLUMNS, NODE_COLUMNS, node_from_row

CHUNK = 500  # ids per IN (...) list, below SQLite's variable limit

_ROW_COLUMNS = ", ".join(MEMORY_COLUMNS)  # the node's columns first, as node_from_row reads them
_TENANT_TABLES = ("memories", "fts_tables", "nodes", "edges", "episodes", "journal")


def _stored(row: Sequence[Any]) -> MemoryRecord:
    n = len(NODE_COLUMNS)
    return MemoryRecord(node_from_row(tuple(row[:n])), str(row[n]), row[n + 1])


def _chunks(ids: Iterable[int]) -> Iterator[list[int]]:
    items = sorted(set(ids))
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


class SqliteMaintenance:
    """Scans, checks and repairs of the SQLite graph store (see :class:`GraphMaintenance`)."""

    def __init__(self, db: GraphDB) -> None:
        self.db = db

    # ---- tenants and memory rows -------------------------------------------------------------
    def tenants_present(self) -> list[str]:
        union = " UNION ".join(f"SELECT tenant FROM {t}" for t in _TENANT_TABLES)
        with store_errors("listing the tenants"), self.db.lock:
            return sorted(str(r[0]) for r in self.db.conn.execute(union))

    def memory_rows(self, tenant: str, ids: Iterable[int] | None = None) -> list[MemoryRecord]:
        base = f"SELECT {_ROW_COLUMNS} FROM memories WHERE tenant = ?"
        with store_errors("reading memory rows"), self.db.lock:
            conn = self.db.conn
            if ids is None:
                return [_stored(r) for r in conn.execute(f"{base} ORDER BY id", (tenant,))]
            rows: list[MemoryRecord] = []
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                rows += [_stored(r) for r in conn.execute(f"{base} AND id IN ({marks}) ORDER BY id",
                                                          (tenant, *chunk))]
            return rows

    def existing_memory(self, tenant: str, session: str, content_hash: str, ts_us: int) -> int | None:
        with store_errors("looking up a memory"), self.db.lock:
            row = self.db.conn.execute(
                "SELECT id FROM memories WHERE tenant = ? AND session = ? AND content_hash = ? AND ts_us = ? "
                "ORDER BY id LIMIT 1", (tenant, session, content_hash, ts_us)).fetchone()
        return None if row is None else int(row[0])

    def restored_from(self, tenant: str, content_hash: str, origin: str) -> int | None:
        with store_errors("looking up a restored memory"), self.db.lock:
            row = self.db.conn.execute(
                "SELECT id FROM memories WHERE tenant = ? AND content_hash = ? "
                "AND json_extract(metadata, '$.restored_from') = ? ORDER BY id LIMIT 1",
                (tenant, content_hash, origin)).fetchone()
        return None if row is None else int(row[0])

    def idempotency_keys(self, tenant: str, ids: Iterable[int]) -> dict[int, str | None]:
        out: dict[int, str | None] = {}
        with store_errors("reading idempotency keys"), self.db.lock:
            for chunk in _chunks(ids):
                marks = ",".join("?" * len(chunk))
                out.update((int(i), k) for i, k in self.db.conn.execute(
                    f"SELECT id, idempotency_key FROM memories WHERE tenant = ? AND id IN ({marks})", (tenant, *chunk)))
        return out

    def id_in_use(self, item_id: int) -> bool:
        with store_errors("checking an id"), self.db.lock:
            cur = self.db.conn.cursor()
            try:
                return self.db.id_in_use(cur, item_id)
            finally:
                cur.close()

    def id_space(self, limit: int) -> IdSpace:
        with store_errors("reading the id sequence"), self.db.lock:
            conn = self.db.conn
            next_id = int(conn.execute("SELECT value FROM meta WHERE key = 'next_id'").fetchone()[0])
            largest = conn.execute(
                "SELECT max(id) FROM (SELECT max(id) AS id FROM memories WHERE id <= :n UNION ALL "
                "SELECT max(id) FROM episodes WHERE id <= :n UNION ALL SELECT max(id) FROM entities WHERE id <= :n "
                "UNION ALL SELECT max(CAST(substr(item_id, instr(item_id, ':') + 1) AS INTEGER)) FROM journal "
                "WHERE CAST(substr(item_id, instr(item_id, ':') + 1) AS INTEGER) <= :n)", {"n": limit}).fetchone()[0]
            beyond = conn.execute(
                "SELECT 'memory', tenant, id FROM memories WHERE id > :n UNION ALL SELECT 'episode', tenant, id "
                "FROM episodes WHERE id > :n UNION ALL SELECT 'entity', tenant, id FROM entities WHERE id > :n "
                "ORDER BY 3 LIMIT 500", {"n": limit}).fetchall()
        return IdSpace(next_id, None if largest is None else int(largest),
                       tuple((str(k), str(t), int(i)) for k, t, i in beyond))

    def reset_id_sequence(self, next_id: int) -> None:
        with store_errors("resetting the id sequence"), self.db.transaction() as cur:
            cur.execute("UPDATE meta SET value = ? WHERE key = 'next_id'", (str(next_id),))

    # ---- episodes, journal --------------------------------------------------------------------
    def episode_ids(self, tenant: str) -> list[int]:
        with store_errors("listing episodes"), self.db.lock:
            return [int(r[0]) for r in self.db.conn.execute(
                "SELECT id FROM episodes WHERE tenant = ? ORDER BY id", (tenant,))]

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        cols = ", ".join(EPISODE_COLUMNS)
        with store_errors("reading episodes"), self.db.lock:
            rows = self.db.conn.execute(f"SELECT {cols} FROM episodes WHERE tenant = ? ORDER BY id", (tenant,))
            return [EpisodeNode(**dict(zip(EPISODE_COLUMNS, r, strict=True))) for r in rows]

    def stale_counts(self) -> dict[str, list[str]]:
        with store_errors("checking the graph's counts"), self.db.lock:
            kept = {(str(t), str(s), str(k)): int(n) for t, s, k, n in
                    self.db.conn.execute("SELECT tenant, scope, key, n FROM counts WHERE n != 0")}
            actual = {(str(t), str(s), str(k)): int(n) for t, s, k, n in self.db.conn.execute(COUNT_SCOPES_SQL)}
        return checks.stale_counts(kept, actual)

    def journal(self) -> list[JournalEntry]:
        with store_errors("reading the journal"), self.db.lock:
            rows = self.db.conn.execute("SELECT seq, op, tenant, item_id, created_us FROM journal ORDER BY seq")
            return [JournalEntry(int(s), str(o), str(t), str(i), int(c)) for s, o, t, i, c in rows]

    # ---- lexical indexes ----------------------------------------------------------------------
    def lexical_state(self, tenant: str) -> LexicalState:
        with store_errors("checking the lexical index"), self.db.lock:
            return lexical.lexical_state(self.db, tenant)

    def window_state(self, tenant: str) -> WindowState:
        with store_errors("checking the lexical window"), self.db.lock:
            return lexical.window_state(self.db, tenant)

    def rebuild_lexical(self, tenant: str) -> None:
        with store_errors("rebuilding the lexical index"):
            lexical.rebuild_lexical(self.db, tenant)

    def purge_rewritten(self, tenants: Iterable[str]) -> bool:
        """FTS5 ``optimize`` merges each tenant's index segments (deleted terms leave them), VACUUM
        rewrites the file without its freed pages, the WAL is checkpointed and truncated. Each step
        is atomic; a kill in between leaves the rows as they are and the next repair's purge redoes it."""
        with store_errors("purging rewritten rows"):
            for tenant in tenants:
                for name in (self.db.fts_table(None, tenant, create=False),
                             self.db.window_table(None, tenant, create=False)):
                    if name is not None:
                        with self.db.transaction() as cur:
                            cur.execute(f"INSERT INTO {name} ({name}) VALUES ('optimize')")
            with self.db.lock:
                self.db.conn.execute("VACUUM")
                self.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return True

    # ---- nodes and edges ----------------------------------------------------------------------
    def nodes(self) -> list[NodeRow]:
        with store_errors("reading graph nodes"), self.db.lock:
            rows = self.db.conn.execute("SELECT node_id, kind, tenant, attrs FROM nodes ORDER BY node_id")
            return [NodeRow(str(n), str(k), str(t), json.loads(a)) for n, k, t, a in rows]

    def edges(self) -> list[EdgeRow]:
        with store_errors("reading graph edges"), self.db.lock:
            rows = self.db.conn.execute("SELECT src, dst, kind, tenant FROM edges ORDER BY src, dst, kind")
            return [EdgeRow(str(s), str(d), str(k), str(t)) for s, d, k, t in rows]

    def missing_structure(self) -> list[MissingStructure]:
        with store_errors("scanning the graph structure"), self.db.lock:
            conn = self.db.conn
            nodes = {str(r[0]) for r in conn.execute("SELECT node_id FROM nodes")}
            edges = {(str(a), str(b), str(k)) for a, b, k in conn.execute("SELECT src, dst, kind FROM edges")}
            rows = conn.execute("SELECT id, tenant, session, agent FROM memories ORDER BY id").fetchall()
        return checks.missing_structure(nodes, edges, rows)

    def create_structure(self, items: Iterable[MissingStructure]) -> None:
        items = list(items)
        node_rows = [(i.node.node_id, i.node.kind, i.node.tenant, json.dumps(dict(i.node.attrs)))
                     for i in items if i.node is not None]
        edge_rows = [(i.edge.src, i.edge.dst, i.edge.kind, i.edge.tenant) for i in items if i.edge is not None]
        with store_errors("recreating graph structure"), self.db.transaction() as cur:
            cur.executemany("INSERT OR IGNORE INTO nodes (node_id, kind, tenant, attrs) VALUES (?, ?, ?, ?)", node_rows)
            cur.executemany("INSERT OR IGNORE INTO edges (src, dst, kind, tenant) VALUES (?, ?, ?, ?)", edge_rows)

    def dangling_edges(self) -> list[DanglingEdge]:
        with store_errors("scanning graph edges"), self.db.lock:
            conn = self.db.conn
            owner = checks.node_owners(conn.execute("SELECT id, tenant, session, agent FROM memories"),
                                       conn.execute("SELECT id, tenant FROM episodes"),
                                       conn.execute("SELECT node_id, tenant FROM nodes"))
            edges = conn.execute("SELECT src, dst, kind, tenant FROM edges ORDER BY src, dst, kind").fetchall()
        return checks.dangling_edges(owner, edges)

    def remove_edges(self, edges: Iterable[EdgeRow]) -> int:
        keys = [(e.src, e.dst, e.kind) for e in edges]
        with store_errors("deleting graph edges"), self.db.transaction() as cur:
            removed = 0
            for key in keys:
                removed += cur.execute("DELETE FROM edges WHERE src = ? AND dst = ? AND kind = ?", key).rowcount
        return removed

    # ---- operator views -----------------------------------------------------------------------
    def disk_use(self) -> DiskUse:
        path = self.db.path
        wal = path.with_name(path.name + "-wal")
        with store_errors("measuring the graph store"):
            return DiskUse(path.stat().st_size if path.is_file() else None,
                           wal.stat().st_size if wal.is_file() else None)

    def content_chars(self) -> dict[str, int]:
        with store_errors("measuring the tenants' content"):
            conn = sqlite3.connect(f"file:{self.db.path}?mode=ro", uri=True, timeout=5)  # WAL: no writer waits
            try:
                rows = conn.execute("SELECT tenant, SUM(content_len) FROM memories GROUP BY tenant").fetchall()
            finally:
                conn.close()
        return {str(t): int(n or 0) for t, n in rows}


__all__ = ["SqliteMaintenance"]
