"""The graph store on one SQLite file (:class:`graph.api.GraphStore`), opened in O(1).

Nothing is read at open: every read is served by an index of the durable store (session
pages, neighbours, field listings, agents, idempotency keys, FTS) and by the counts the
write transaction keeps (:mod:`graph.sqlite.txn`). What a request touches is kept in bounded
caches — memory nodes in an LRU of ``cache_nodes`` entries, each tenant's agent-name index,
k-hop neighbourhoods as networkx graphs for traversal — so memory grows with the working
set, never with the store. Every read takes the tenant; a foreign id reads as missing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext, suppress
from typing import TYPE_CHECKING, Any

from graph.agent_names import AgentNameIndex
from graph.api import (
    AGENT,
    EpisodeNode,
    JournalEntry,
    Key,
    LexicalHit,
    MemoryNode,
    RowFilter,
    SessionStats,
)
from graph.keys import SEP
from graph.node_cache import LRU
from graph.sqlite.adjacency_cache import AdjacencyCache
from graph.sqlite.db import GraphDB
from graph.sqlite.edges import SqliteEdges, adjacent_sql, order_index, packed_key
from graph.sqlite.entities import SqliteEntityReads
from graph.sqlite.errors import sqlite_errors
from graph.sqlite.fields import SqliteFieldReads
from graph.sqlite.lexical import SqliteLexical
from graph.sqlite.rows import EPISODE_SELECT, NODE_SELECT, episode_from_row, node_from_row
from graph.sqlite.txn import SqliteTxn
from graph.traversal import neighbourhood

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_CACHE_NODES = 50_000
AGENT_INDEX_TENANTS = 256
NEIGHBOURHOODS = 64
_CHUNK = 500
_ADJACENT_CHUNK = 300  # three parameters a row: under SQLite's oldest bound of 999 variables
_PAGE_STEP = 64


class SqliteGraphStore(SqliteEdges, SqliteEntityReads, SqliteFieldReads):
    def __init__(self, db: GraphDB, *, cache_nodes: int = DEFAULT_CACHE_NODES) -> None:
        self.db = db
        self.nodes: LRU[int, MemoryNode] = LRU(cache_nodes)
        self._adjacent = AdjacencyCache(cache_nodes)  # recall's session neighbours, while unwritten
        self._agents: LRU[str, AgentNameIndex] = LRU(AGENT_INDEX_TENANTS)
        self._versions: dict[str, int] = {}  # tenant -> writes seen in this process (cache keys)
        self._changes: dict[str, int] = {}  # tenant -> memories written or erased in this process
        self._lexical = SqliteLexical(db, lambda tenant: self._changes.get(tenant, 0))
        self._neighbourhoods: LRU[tuple[Any, ...], nx.MultiDiGraph] = LRU(NEIGHBOURHOODS)

    # ---- plumbing ----------------------------------------------------------------------------
    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        with self.db.lock, sqlite_errors():
            yield self.db.conn

    def _one(self, sql: str, args: Sequence[Any]) -> Any:
        with self._read() as conn:
            return conn.execute(sql, args).fetchone()

    def _all(self, sql: str, args: Sequence[Any], *, tuples: bool = False) -> list[Any]:
        """With ``tuples``, plain tuples (no ``sqlite3.Row``): what node_from_row reads positionally."""
        with self._read() as conn, closing(conn.cursor()) as cur:
            cur.row_factory = None if tuples else cur.row_factory
            return cur.execute(sql, args).fetchall()

    def version(self, tenant: str) -> int:
        return self._versions.get(tenant, 0)

    @property
    def prune_min_rows(self) -> int:
        """Query terms in fewer rows than this are rare in a big tenant (see graph.sqlite.lexical)."""
        return self._lexical.min_rows

    @prune_min_rows.setter
    def prune_min_rows(self, rows: int) -> None:
        self._lexical.min_rows = rows

    @property
    def lexical_sample_rows(self) -> int:
        """A tenant of 4x as many rows estimates a common query word's count from this many newest rows."""
        return self._lexical.sample_rows

    @lexical_sample_rows.setter
    def lexical_sample_rows(self, rows: int) -> None:
        self._lexical.sample_rows = rows

    def consistent_reads(self, tenant: str) -> AbstractContextManager[None]:
        """Nothing to share: one process owns the file, and its caches follow its own writes."""
        return nullcontext()

    # ---- nodes -------------------------------------------------------------------------------
    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        node = self.nodes.get(mem_id)
        if node is None:
            row = self._one(f"SELECT {NODE_SELECT} FROM memories WHERE id = ?", (mem_id,))
            if row is None:
                return None
            node = node_from_row(row)
            self.nodes.put(mem_id, node)
        return node if node.tenant == tenant else None

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        cached, missing = self.nodes.get_many(ids)
        out = {mem_id: node for mem_id, node in cached.items() if node.tenant == tenant}
        for start in range(0, len(missing), _CHUNK):
            chunk = missing[start:start + _CHUNK]
            # by primary key; the tenant is checked on each row
            for row in self._all(f"SELECT {NODE_SELECT} FROM memories WHERE id IN ({','.join('?' * len(chunk))})",
                                 chunk, tuples=True):
                node = node_from_row(row)
                self.nodes.put(node.id, node)
                if node.tenant == tenant:
                    out[node.id] = node
        return out

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        wanted = list(ids)
        out: dict[int, str] = {}
        for start in range(0, len(wanted), _CHUNK):
            chunk = wanted[start:start + _CHUNK]
            for mem_id, content, owner in self._all(
                f"SELECT id, content, tenant FROM memories WHERE id IN ({','.join('?' * len(chunk))})", chunk
            ):
                if owner == tenant:
                    out[mem_id] = content
        return out

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None:
        row = self._one(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = ? AND tenant = ?", (ep_id, tenant))
        return None if row is None else episode_from_row(row)

    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None:
        row = self._one(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = ? AND session = ?", (tenant, session))
        return None if row is None else episode_from_row(row)

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_from_row(r) for r in
                self._all(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = ? ORDER BY id", (tenant,))]

    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None:
        row = self._one(f"SELECT {NODE_SELECT} FROM memories WHERE tenant = ? AND idempotency_key = ?", (tenant, key))
        return None if row is None else node_from_row(row)

    def memory_ids(self, tenant: str) -> list[int]:
        return [k[1] for k in self.iter_newest(tenant, None)]

    # ---- order -------------------------------------------------------------------------------
    def page(self, tenant: str, session: str | None, before: Key | None, limit: int, *,
             turns_only: bool = False) -> list[Key]:
        where, args = ["tenant = ?"], [tenant]
        if session is not None:
            where.append("session = ?")
            args.append(session)
        if turns_only:
            where.append("type = 'turn'")
        cond = " AND ".join(where)
        # the index is named: without statistics SQLite may walk (tenant, type, ts_us) in time order
        # and filter the session, reading the whole tenant for one page
        sql = f"SELECT ts_us, id FROM memories INDEXED BY {order_index(session, turns_only)} WHERE {cond}"
        if before is None:
            rows = self._all(f"{sql} ORDER BY ts_us DESC, id DESC LIMIT ?", [*args, limit])
        else:  # two index ranges: the rest of the timestamp, then everything older
            rows = self._all(f"{sql} AND ts_us = ? AND id < ? ORDER BY id DESC LIMIT ?", [*args, *before, limit])
            if len(rows) < limit:
                rows += self._all(f"{sql} AND ts_us < ? ORDER BY ts_us DESC, id DESC LIMIT ?",
                                  [*args, before[0], limit - len(rows)])
        return [(int(a), int(b)) for a, b in rows]

    def iter_newest(self, tenant: str, session: str | None, before: Key | None = None, *,
                    turns_only: bool = False) -> Iterator[Key]:
        step = _PAGE_STEP
        while True:
            keys = self.page(tenant, session, before, step, turns_only=turns_only)
            yield from keys
            if len(keys) < step:
                return
            before, step = keys[-1], min(step * 4, 4096)

    def adjacent(self, tenant: str, session: str, key: Key, *, forward: bool, turns_only: bool = False) -> Key | None:
        op, order = (">", "ASC") if forward else ("<", "DESC")
        turn = " AND type = 'turn'" if turns_only else ""
        base = (f"SELECT ts_us, id FROM memories INDEXED BY {order_index(session, turns_only)} "
                f"WHERE tenant = ? AND session = ?{turn} AND ")
        with self._read() as conn:
            found = conn.execute(f"{base}ts_us = ? AND id {op} ? ORDER BY id {order} LIMIT 1",
                                 (tenant, session, *key)).fetchone()
            if found is None:
                found = conn.execute(f"{base}ts_us {op} ? ORDER BY ts_us {order}, id {order} LIMIT 1",
                                     (tenant, session, key[0])).fetchone()
        return None if found is None else (int(found[0]), int(found[1]))

    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        """One statement per chunk: each neighbour is one index seek inside SQLite (a Python
        round trip per seek cost recall ~14 ms for 250 candidates); only the tenant's nodes are looked up,
        and only those whose answer is not kept from an earlier read of an unwritten session."""
        out, missing = self._adjacent.get_many(tenant, nodes)
        tick = self._adjacent.tick()
        read: dict[int, tuple[Key | None, Key | None]] = {}
        for start in range(0, len(missing), _ADJACENT_CHUNK):
            chunk = missing[start:start + _ADJACENT_CHUNK]
            args: list[Any] = [x for n in chunk for x in (n.id, n.session, n.ts_us)]
            for mem_id, before, after in self._all(adjacent_sql(len(chunk)), [*args, tenant], tuples=True):
                read[int(mem_id)] = (packed_key(before), packed_key(after))
        self._adjacent.put_many(tick, missing, read)
        out.update(read)
        return out

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        where, args = ("tenant = ? AND session = ?", (tenant, session)) if session is not None else (
            "tenant = ?", (tenant,))
        table = f"memories INDEXED BY {order_index(session, False)}"
        with self._read() as conn:
            first = conn.execute(f"SELECT ts_us, id FROM {table} WHERE {where} ORDER BY ts_us, id LIMIT 1",
                                 args).fetchone()
            if first is None:
                return None
            last = conn.execute(f"SELECT ts_us, id FROM {table} WHERE {where} ORDER BY ts_us DESC, id DESC LIMIT 1",
                                args).fetchone()
        return (int(first[0]), int(first[1])), (int(last[0]), int(last[1]))

    def _count(self, tenant: str, scope: str, key: str) -> int:
        row = self._one("SELECT n FROM counts WHERE tenant = ? AND scope = ? AND key = ?", (tenant, scope, key))
        return 0 if row is None else int(row[0])

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int:
        if session is None:
            return self._count(tenant, "all", "") - (self._count(tenant, "nonturn", "") if turns_only else 0)
        return self._count(tenant, "turns" if turns_only else "session", session)

    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        rows = self._all("SELECT key, n FROM counts WHERE tenant = ? AND scope = 'day' AND key >= ? AND key < ?",
                         (tenant, f"{first_day:08d}", f"{first_day + days:08d}"))
        found = {int(k): int(n) for k, n in rows}
        return [found.get(first_day + i, 0) for i in range(days)]

    def sessions(self, tenant: str) -> list[SessionStats]:
        counts = self._all("SELECT scope, key, n FROM counts WHERE tenant = ? AND scope IN ('session', 'turns') "
                           "AND n > 0", (tenant,))
        memories = {k: int(n) for scope, k, n in counts if scope == "session"}
        turns = {k: int(n) for scope, k, n in counts if scope == "turns"}
        out = []
        for session in sorted(memories):
            b = self.bounds(tenant, session)
            out.append(SessionStats(session, memories[session], turns.get(session, 0), b[0] if b else None,
                                    b[1] if b else None))
        return out

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        rows = self._all("SELECT key, n FROM counts WHERE tenant = ? AND scope = 'private' AND key >= ? AND key < ?",
                         (tenant, session + SEP, session + chr(0x20)))
        return sum(int(n) for key, n in rows if key.split(SEP, 1)[1] != viewer)

    def non_turn_count(self, tenant: str) -> int:
        return self._count(tenant, "nonturn", "")

    def neighbourhood(self, tenant: str, node: str, depth: int, max_nodes: int, hub_degree: int,
                      children: int = 8) -> nx.MultiDiGraph:
        """Cached per (tenant, node, depth, budgets) until the tenant's next write in this process."""
        key = (tenant, node, depth, max_nodes, hub_degree, children, self.version(tenant))
        found = self._neighbourhoods.get(key)
        if found is None:
            found = neighbourhood(self, tenant, node, depth, max_nodes, hub_degree, children)
            self._neighbourhoods.put(key, found)
        return found

    # ---- tenants and agents ------------------------------------------------------------------
    def tenants(self) -> list[str]:
        return [str(r[0]) for r in self._all("SELECT tenant FROM counts WHERE scope = 'all' AND key = '' AND n > 0 "
                                             "ORDER BY tenant", ())]

    def agent_names(self, tenant: str) -> AgentNameIndex:
        index = self._agents.get(tenant)
        if index is None:
            index = AgentNameIndex()
            for (attrs,) in self._all("SELECT attrs FROM nodes WHERE tenant = ? AND kind = ?", (tenant, AGENT)):
                index.add(str(json.loads(attrs)["agent"]))
            self._agents.put(tenant, index)
        return index

    def agents(self, tenant: str) -> frozenset[str]:
        return frozenset(self.agent_names(tenant).names)

    # ---- lexical -----------------------------------------------------------------------------
    def lexical_window(self, f: RowFilter, terms: Sequence[str], limit: int, *, own: bool = False) -> list[LexicalHit]:
        with sqlite_errors():  # on a snapshot of its own, beside the writer (graph.sqlite.readers)
            return self._lexical.window(f, list(terms), limit, own=own)

    def lexical_windows(self, f: RowFilter, terms: Sequence[str], limit: int) -> tuple[list[LexicalHit],
                                                                                       list[LexicalHit]]:
        with sqlite_errors():
            return self._lexical.windows(f, list(terms), limit)

    def lexical_phrases(self, f: RowFilter, phrases: Sequence[str], limit: int) -> list[LexicalHit]:
        with sqlite_errors():
            return self._lexical.phrases(f, list(phrases), limit)

    # ---- journal, meta, lifecycle ------------------------------------------------------------
    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        rows = self._all("SELECT seq, op, tenant, item_id, created_us FROM journal ORDER BY seq LIMIT ?",
                         (-1 if limit is None else limit,))
        return [JournalEntry(int(s), str(o), str(t), str(i), int(c)) for s, o, t, i, c in rows]

    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        return sorted(seqs)  # one process owns the file: every entry is its own

    def journal_size(self) -> int:
        return int(self._one("SELECT count(*) FROM journal", ())[0])

    def meta(self, key: str) -> str | None:
        with sqlite_errors():
            return self.db.meta(key)

    @contextmanager
    def transaction(self) -> Iterator[SqliteTxn]:
        try:
            with sqlite_errors(), self.db.transaction() as cur:
                txn = SqliteTxn(self.db, cur)
                yield txn
        except BaseException:
            self._forget_uncommitted_tables()
            raise
        self._after_commit(txn)

    def _forget_uncommitted_tables(self) -> None:
        """A rolled-back CREATE VIRTUAL TABLE must be forgotten (best effort: the store may be failing)."""
        with suppress(sqlite3.Error):
            self.db.reload_fts_names()

    def _after_commit(self, txn: SqliteTxn) -> None:
        fx = txn.effects
        with self.db.lock:
            self._adjacent.written({(n.tenant, n.session) for n in fx.written} | fx.sessions)
            for tenant, mem_id in fx.erased:
                self.nodes.discard(mem_id)
                self._changes[tenant] = self._changes.get(tenant, 0) + 1
            for node in fx.written:
                self.nodes.put(node.id, node)
                self._changes[node.tenant] = self._changes.get(node.tenant, 0) + 1
            for tenant, agent in fx.agents:
                if (index := self._agents.get(tenant)) is not None:
                    index.add(agent)
            for tenant in fx.tenants:
                self._versions[tenant] = self._versions.get(tenant, 0) + 1

    def invalidate(self) -> None:
        with self.db.lock:
            self.nodes.clear()
            self._adjacent.clear()
            self._agents.clear()
            self._neighbourhoods.clear()
            self._versions = {t: v + 1 for t, v in self._versions.items()}
            self._lexical.forget()
            self.db.reload_fts_names()

    def close(self) -> None:
        self.db.close()

