""":class:`graph.maintenance_api.GraphMaintenance` over the PostgreSQL graph store's pool.

``PgMaintenance(store)`` reads through the store's pool with its retry policy (transient
failures retried for ``retry_s``, every failure a :class:`graph.api.GraphStoreError` by
SQLSTATE) and writes through :meth:`PostgresGraphStore.run` (one transaction, retried whole
on a transient failure, moving the versions of the tenants it touched so every replica's
caches follow). Semantics are those of :mod:`graph.sqlite.maintenance`; the scans are
operator-wide: :meth:`journal` lists every replica's entries, not only this one's. The lexical
checks live in :mod:`graph.pg.maintenance_lexical`.

:meth:`disk_use`: ``database`` is ``pg_database_size(current_database())`` — every relation
of the store's database with its indexes and TOAST, as the server stores it; ``wal`` is None
(the write-ahead log is the server's, shared by all its databases).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import psycopg

from graph import maintenance_checks as checks
from graph.api import (
    EpisodeNode,
    JournalEntry,
    MemoryRecord,
    ep_node,
    mem_node,
)
from graph.maintenance_api import (
    DanglingEdge,
    DiskUse,
    EdgeRow,
    GraphMaintenance,
    IdSpace,
    LexicalState,
    MissingStructure,
    NodeRow,
    WindowState,
)
from graph.pg import counts
from graph.pg import maintenance_lexical as lexical
from graph.pg.journal import LeasedJournalEntry
from graph.pg.rows import EPISODE_SELECT, NODE_COLUMNS, NODE_SELECT, episode_node, memory_node
from graph.pg.store import PostgresGraphStore
from graph.pg.txn import PgTxn

T = TypeVar("T")
Conn = psycopg.Connection[Any]
_ROW_SELECT = f"{NODE_SELECT}, m.content, m.idempotency_key"
_TENANT_TABLES = ("memories", "nodes", "edges", "episodes", "journal")
_TABLES = ("memories", "nodes", "edges", "episodes", "journal", "meta", "tenant_state", "session_counts",
           "private_counts", "counts")


def _stored(row: Sequence[Any]) -> MemoryRecord:
    n = len(NODE_COLUMNS)
    return MemoryRecord(memory_node(row[:n]), str(row[n]), row[n + 1])


class PgMaintenance:
    """Scans, checks and repairs of the PostgreSQL graph store (see :class:`GraphMaintenance`)."""

    def __init__(self, store: PostgresGraphStore) -> None:
        self.store = store

    def _read(self, fn: Callable[[Conn], T], what: str) -> T:
        return self.store.read_with(fn, what)

    def _rows(self, query: str, args: Sequence[Any], what: str) -> list[tuple[Any, ...]]:
        return self._read(lambda c: c.execute(query, list(args)).fetchall(), what)

    def _write(self, body: Callable[[PgTxn], T]) -> T:
        return self.store.run(body)

    # ---- tenants and memory rows -------------------------------------------------------------
    def tenants_present(self) -> list[str]:
        union = " UNION ".join(f"SELECT tenant FROM {t}" for t in _TENANT_TABLES)
        return sorted(str(r[0]) for r in self._rows(union, [], "listing the tenants"))

    def memory_rows(self, tenant: str, ids: Iterable[int] | None = None) -> list[MemoryRecord]:
        base = f"SELECT {_ROW_SELECT} FROM memories m WHERE m.tenant = %s"
        if ids is None:
            rows = self._rows(f"{base} ORDER BY m.id", [tenant], "reading memory rows")
        else:
            rows = self._rows(f"{base} AND m.id = ANY(%s::bigint[]) ORDER BY m.id", [tenant, sorted(set(ids))],
                              "reading memory rows")
        return [_stored(r) for r in rows]

    def existing_memory(self, tenant: str, session: str, content_hash: str, ts_us: int) -> int | None:
        rows = self._rows("SELECT id FROM memories WHERE tenant = %s AND session = %s AND content_hash = %s "
                          "AND ts_us = %s ORDER BY id LIMIT 1", [tenant, session, content_hash, ts_us],
                          "looking up a memory")
        return int(rows[0][0]) if rows else None

    def restored_from(self, tenant: str, content_hash: str, origin: str) -> int | None:
        rows = self._rows("SELECT id FROM memories WHERE tenant = %s AND content_hash = %s "
                          "AND metadata::jsonb ->> 'restored_from' = %s ORDER BY id LIMIT 1",
                          [tenant, content_hash, origin], "looking up a restored memory")
        return int(rows[0][0]) if rows else None

    def idempotency_keys(self, tenant: str, ids: Iterable[int]) -> dict[int, str | None]:
        rows = self._rows("SELECT id, idempotency_key FROM memories WHERE tenant = %s AND id = ANY(%s::bigint[])",
                          [tenant, sorted(set(ids))], "reading idempotency keys")
        return {int(i): k for i, k in rows}

    def id_in_use(self, item_id: int) -> bool:
        rows = self._rows("SELECT EXISTS (SELECT 1 FROM memories WHERE id = %s) OR EXISTS (SELECT 1 FROM episodes "
                          "WHERE id = %s) OR EXISTS (SELECT 1 FROM entities WHERE id = %s) OR EXISTS (SELECT 1 FROM "
                          "journal WHERE item_id IN (%s, %s))",
                          [item_id, item_id, item_id, mem_node(item_id), ep_node(item_id)], "checking an id")
        return bool(rows[0][0])

    def id_space(self, limit: int) -> IdSpace:
        def read(conn: Conn) -> IdSpace:
            next_id = conn.execute("SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END "
                                   "FROM item_ids").fetchall()[0]
            largest = conn.execute(
                "SELECT max(id) FROM (SELECT max(id) AS id FROM memories WHERE id <= %(n)s UNION ALL "
                "SELECT max(id) FROM episodes WHERE id <= %(n)s UNION ALL SELECT max(id) FROM entities "
                "WHERE id <= %(n)s UNION ALL SELECT max(split_part(item_id, ':', 2)::numeric) FROM journal "
                "WHERE split_part(item_id, ':', 2)::numeric <= %(n)s) ids", {"n": limit}).fetchall()[0]
            beyond = conn.execute(
                "SELECT 'memory', tenant, id FROM memories WHERE id > %(n)s UNION ALL SELECT 'episode', tenant, id "
                "FROM episodes WHERE id > %(n)s UNION ALL SELECT 'entity', tenant, id FROM entities WHERE id > %(n)s "
                "ORDER BY 3 LIMIT 500", {"n": limit}).fetchall()
            return IdSpace(int(next_id[0]), None if largest[0] is None else int(largest[0]),
                           tuple((str(k), str(t), int(i)) for k, t, i in beyond))
        return self._read(read, "reading the id sequence")

    def reset_id_sequence(self, next_id: int) -> None:
        def body(tx: PgTxn) -> None:
            tx.conn.execute("SELECT pg_advisory_xact_lock(hashtext('memcore:item_ids'))")
            tx.conn.execute("SELECT setval('item_ids', %s, false)", [next_id])
        self._write(body)

    # ---- episodes, journal --------------------------------------------------------------------
    def episode_ids(self, tenant: str) -> list[int]:
        return [int(r[0]) for r in self._rows("SELECT id FROM episodes WHERE tenant = %s ORDER BY id", [tenant],
                                              "listing episodes")]

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_node(r) for r in self._rows(
            f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s ORDER BY id", [tenant], "reading episodes")]

    def stale_counts(self) -> dict[str, list[str]]:
        """Kept counts (every counter table, see :mod:`graph.pg.counts`) against a recount, read in
        one snapshot (REPEATABLE READ) so a concurrent add never shows as a disagreement."""
        def read(conn: Conn) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return conn.execute(counts.KEPT_SQL).fetchall(), conn.execute(counts.ACTUAL_SQL).fetchall()

        kept_rows, actual_rows = self._read(read, "checking the graph's counts")
        kept = {(str(t), str(s), str(k)): int(n) for t, s, k, n in kept_rows if n}
        actual = {(str(t), str(s), str(k)): int(n or 0) for t, s, k, n in actual_rows}
        return checks.stale_counts(kept, actual)

    def journal(self) -> list[JournalEntry]:
        """Every pending entry, whatever replica owns it (with its owner)."""
        rows = self._rows("SELECT seq, op, tenant, item_id, created_us, owner FROM journal ORDER BY seq", [],
                          "reading the journal")
        return [LeasedJournalEntry(int(r[0]), str(r[1]), str(r[2]), str(r[3]), int(r[4]), str(r[5])) for r in rows]

    # ---- lexical indexes ----------------------------------------------------------------------
    def lexical_state(self, tenant: str) -> LexicalState:
        return self._read(lambda c: lexical.lexical_state(c, tenant), "checking the lexical index")

    def window_state(self, tenant: str) -> WindowState:
        return self._read(lambda c: lexical.window_state(c, tenant), "checking the lexical window")

    def rebuild_lexical(self, tenant: str) -> None:
        def body(tx: PgTxn) -> None:
            lexical.rebuild(tx.conn, tenant)
            tx.touch(tenant)
        self._write(body)

    # ---- nodes and edges ----------------------------------------------------------------------
    def nodes(self) -> list[NodeRow]:
        rows = self._rows("SELECT node_id, kind, tenant, attrs FROM nodes ORDER BY node_id COLLATE \"C\"", [],
                          "reading graph nodes")
        return [NodeRow(str(n), str(k), str(t), json.loads(a)) for n, k, t, a in rows]

    def edges(self) -> list[EdgeRow]:
        rows = self._rows('SELECT src, dst, kind, tenant FROM edges ORDER BY src COLLATE "C", dst COLLATE "C", '
                          'kind COLLATE "C"', [], "reading graph edges")
        return [EdgeRow(str(s), str(d), str(k), str(t)) for s, d, k, t in rows]

    def missing_structure(self) -> list[MissingStructure]:
        def read(conn: Conn) -> tuple[set[str], set[tuple[str, str, str]], list[tuple[Any, ...]]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                return ({str(r[0]) for r in conn.execute("SELECT node_id FROM nodes")},
                        {(str(a), str(b), str(k)) for a, b, k in conn.execute("SELECT src, dst, kind FROM edges")},
                        conn.execute("SELECT id, tenant, session, agent FROM memories ORDER BY id").fetchall())

        nodes, edges, rows = self._read(read, "scanning the graph structure")
        return checks.missing_structure(nodes, edges, rows)

    def create_structure(self, items: Iterable[MissingStructure]) -> None:
        items = list(items)
        node_rows = [(i.node.node_id, i.node.kind, i.node.tenant, json.dumps(dict(i.node.attrs), ensure_ascii=False))
                     for i in items if i.node is not None]
        edge_rows = [(i.edge.src, i.edge.dst, i.edge.kind, i.edge.tenant) for i in items if i.edge is not None]

        def body(tx: PgTxn) -> None:
            with tx.conn.cursor() as cur:
                if node_rows:
                    cur.executemany("INSERT INTO nodes (node_id, kind, tenant, attrs) VALUES (%s, %s, %s, %s) "
                                    "ON CONFLICT DO NOTHING", node_rows)
                if edge_rows:
                    cur.executemany("INSERT INTO edges (src, dst, kind, tenant) VALUES (%s, %s, %s, %s) "
                                    "ON CONFLICT DO NOTHING", edge_rows)
            for tenant in sorted({r[2] for r in node_rows} | {r[3] for r in edge_rows}):
                tx.touch(tenant)
        self._write(body)

    def dangling_edges(self) -> list[DanglingEdge]:
        def read(conn: Conn) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                owner = checks.node_owners(conn.execute("SELECT id, tenant, session, agent FROM memories"),
                                           conn.execute("SELECT id, tenant FROM episodes"),
                                           conn.execute("SELECT node_id, tenant FROM nodes"))
                edges = conn.execute('SELECT src, dst, kind, tenant FROM edges ORDER BY src COLLATE "C", '
                                     'dst COLLATE "C", kind COLLATE "C"').fetchall()
                return owner, edges

        owner, edges = self._read(read, "scanning graph edges")
        return checks.dangling_edges(owner, edges)

    def remove_edges(self, edges: Iterable[EdgeRow]) -> int:
        keys = [(e.src, e.dst, e.kind) for e in edges]

        def body(tx: PgTxn) -> int:
            if not keys:
                return 0
            gone = tx.conn.execute(
                "DELETE FROM edges WHERE (src, dst, kind) IN (SELECT * FROM unnest(%s::text[], %s::text[], "
                "%s::text[])) RETURNING tenant", [[k[0] for k in keys], [k[1] for k in keys], [k[2] for k in keys]],
            ).fetchall()
            for tenant in sorted({str(r[0]) for r in gone}):
                tx.touch(tenant)
            return len(gone)
        return self._write(body)

    # ---- operator views -----------------------------------------------------------------------
    def purge_rewritten(self, tenants: Iterable[str]) -> bool:
        """PostgreSQL keeps a rewritten row's old version until VACUUM reclaims it, which cannot run
        inside the pool's transactions: the operator runs ``VACUUM FULL memories, episodes`` (see
        docs/secrets.md)."""
        return False

    def disk_use(self) -> DiskUse:
        size = self._rows("SELECT pg_database_size(current_database())", [], "measuring the graph store")
        return DiskUse(int(size[0][0]), None)

    def content_chars(self) -> dict[str, int]:
        rows = self._rows("SELECT tenant, sum(content_len) FROM memories GROUP BY tenant", [],
                          "measuring the tenants' content")
        return {str(t): int(n or 0) for t, n in rows}


if TYPE_CHECKING:  # mypy holds the class to the Protocol
    def _is_maintenance(m: PgMaintenance) -> GraphMaintenance:
        return m


__all__ = ["PgMaintenance"]
