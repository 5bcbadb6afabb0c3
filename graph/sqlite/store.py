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
    INDEXED_FIELDS,
    SUPERSEDES,
    EdgeRef,
    EntityNode,
    EntityRecord,
    EntityRelation,
    EpisodeNode,
    JournalEntry,
    Key,
    LexicalHit,
    MemoryNode,
    RowFilter,
    SessionStats,
    entity_node,
    entity_norm,
)
from graph.entity_values import display_names, name_keys, resolve_key, unique_aliases
from graph.keys import SEP
from graph.node_cache import LRU
from graph.sqlite.adjacency_cache import AdjacencyCache
from graph.sqlite.db import GraphDB
from graph.sqlite.entities import SEEN, VISIBLE, chunks, lookup_keys_with, qmarks, viewer_key
from graph.sqlite.errors import sqlite_errors
from graph.sqlite.lexical import SqliteLexical
from graph.sqlite.rows import EPISODE_SELECT, NODE_SELECT, episode_from_row, node_from_row
from graph.sqlite.txn import SqliteTxn
from graph.sqlite.walks import adjacent_sql, order_index, packed_key
from graph.traversal import neighbourhood

if TYPE_CHECKING:
    import networkx as nx

DEFAULT_CACHE_NODES = 50_000
AGENT_INDEX_TENANTS = 256
NEIGHBOURHOODS = 64
_CHUNK = 500
_ADJACENT_CHUNK = 300  # three parameters a row: under SQLite's oldest bound of 999 variables
_PAGE_STEP = 64
# the partial index edges_supersedes serves only a query that names its kind as this literal
_CHAINED = f"tenant = ? AND kind = '{SUPERSEDES}'"


class SqliteGraphStore:
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

    # ---- fields ---------------------------------------------------------------------------
    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        rows = self._all(f"SELECT id FROM memories INDEXED BY memories_{field} WHERE tenant = ? AND {field} = ? "
                         "ORDER BY ts_us DESC, id DESC "
                         "LIMIT ?", (tenant, value, -1 if limit is None else limit))
        return [int(r[0]) for r in rows]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        return self._count(tenant, field, value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        rows = self._all("SELECT key, n FROM counts WHERE tenant = ? AND scope = ? AND n > 0 ORDER BY key",
                         (tenant, field))
        return {str(k): int(n) for k, n in rows}

    def private_count(self, tenant: str) -> int:
        row = self._one("SELECT coalesce(sum(n), 0) FROM counts WHERE tenant = ? AND scope = 'private'", (tenant,))
        return int(row[0])

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        rows = self._all("SELECT id FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                         "AND source_id < ? "
                         "ORDER BY source_id, id LIMIT ?", (tenant, prefix, prefix + chr(0x10FFFF),
                                                            -1 if limit is None else limit))
        return [int(r[0]) for r in rows if r[0] is not None]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        row = self._one("SELECT count(*) FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                        "AND source_id < ?",
                        (tenant, prefix, prefix + chr(0x10FFFF)))
        return int(row[0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self._all("SELECT key FROM counts WHERE tenant = ? AND scope = 'schan' AND key >= ? AND key < ? "
                         "AND n > 0", (tenant, channel + SEP, channel + chr(0x20)))
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self._count(tenant, "schan", f"{channel}{SEP}{session}") > 0

    # ---- edges -------------------------------------------------------------------------------
    def _node_tenant(self, conn: sqlite3.Connection, node: str) -> str | None:
        kind, _, rest = node.partition(":")
        if kind == "mem" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM memories WHERE id = ?", (int(rest),)).fetchone()
        elif kind == "ep" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM episodes WHERE id = ?", (int(rest),)).fetchone()
        elif kind == "ent" and rest.isdigit():
            row = conn.execute("SELECT tenant FROM entities WHERE id = ?", (int(rest),)).fetchone()
        else:
            row = conn.execute("SELECT tenant FROM nodes WHERE node_id = ?", (node,)).fetchone()
        return None if row is None else str(row[0])

    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]:
        with self._read() as conn:
            if self._node_tenant(conn, node) != tenant:
                return []
            out = [EdgeRef("out", k, d) for d, k in conn.execute(
                "SELECT dst, kind FROM edges WHERE src = ? AND tenant = ?", (node, tenant))]
            out += [EdgeRef("in", k, s) for s, k in conn.execute(
                "SELECT src, kind FROM edges WHERE dst = ? AND tenant = ?", (node, tenant))]
            return [e for e in out if self._node_tenant(conn, e.other) == tenant]

    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        """On the partial index of SUPERSEDES edges (schema step 8): a tenant with no chain costs one
        seek, not one probe of the whole-table ``edges_dst`` index per id (recall asks ~200 ids)."""
        wanted = [f"mem:{i}" for i in ids]
        out: dict[int, list[int]] = {}
        with self._read() as conn:
            if not wanted or conn.execute(f"SELECT 1 FROM edges INDEXED BY edges_supersedes WHERE {_CHAINED} "
                                          "LIMIT 1", (tenant,)).fetchone() is None:
                return out
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                for src, dst in conn.execute(f"SELECT src, dst FROM edges INDEXED BY edges_supersedes WHERE "
                                             f"{_CHAINED} AND dst IN ({','.join('?' * len(chunk))})",
                                             [tenant, *chunk]):
                    if str(src).startswith("mem:"):
                        out.setdefault(int(str(dst)[4:]), []).append(int(str(src)[4:]))
        return out

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

    # ---- entities (viewer: an agent sees shared mentions and its own private ones) -----------------
    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        """Each entity's aliases in order: all of them (``everyone``) or those the viewer may read."""
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {SEEN}", [viewer_key(viewer)])
        for chunk in chunks(ids):
            for entity_id, alias in self._all(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id "
                                              f"IN ({qmarks(len(chunk))}){seen} ORDER BY a.entity_id, a.pos",
                                              [*chunk, *extra]):
                out.setdefault(int(entity_id), []).append(str(alias))
        return {k: unique_aliases(v) for k, v in out.items()}

    def _keys(self, tenant: str, keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
        return lookup_keys_with(self._all, tenant, keys)

    def _nodes(self, tenant: str, rows: list[Any], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        # the kept counts (step 7): two key reads, whatever the number of mentions
        rows = self._all("SELECT e.id, e.name, e.kind, e.created_us, (SELECT coalesce(sum(c.n), 0) FROM counts c "
                         "WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN (e.id || char(31), "
                         "e.id || char(31) || ?)) FROM entities e WHERE e.id = ? AND e.tenant = ?",
                         (viewer_key(viewer), entity_id, tenant))
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for chunk in chunks(entity_ids) for r in self._all(
            f"SELECT e.id FROM entities e WHERE e.tenant = ? AND e.id IN ({qmarks(len(chunk))}) AND (SELECT "
            "coalesce(sum(c.n), 0) FROM counts c WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN "
            "(e.id || char(31), e.id || char(31) || ?)) > 0", [tenant, *chunk, viewer_key(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        entity_id = self.entity_ids(tenant, [name], viewer).get(name)
        return None if entity_id is None else self.entity(tenant, entity_id, viewer)

    def entity_ids(self, tenant: str, names: Sequence[str], viewer: str | None = None) -> dict[str, int]:
        norms = {name: entity_norm(name) for name in names}
        found = self._keys(tenant, [k for n in dict.fromkeys(norms.values()) for k in name_keys(n, viewer)])
        resolved = {name: resolve_key(found, norm, viewer) for name, norm in norms.items()}
        return {name: e for name, e in resolved.items() if e is not None}

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts (step 7): one row per entity and viewer, none per mention (counting the
        # mentions' index took 1.3-2 s for a tenant of 1M memories)
        kind_sql = " AND e.kind = ?" if kind is not None else ""
        rows = self._all("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT CAST(substr(key, 1, "
                         "instr(key, char(31)) - 1) AS INTEGER) AS entity_id, sum(n) AS n FROM counts WHERE "
                         "tenant = ? AND scope = 'mention' AND substr(key, instr(key, char(31)) + 1) IN ('', ?) "
                         f"GROUP BY 1) c JOIN entities e ON e.id = c.entity_id AND e.tenant = ?{kind_sql} "
                         "WHERE c.n > 0 ORDER BY c.n DESC, e.name, e.id LIMIT ?",
                         [tenant, viewer_key(viewer), tenant, *([kind] if kind is not None else []),
                          -1 if limit is None else limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for entity_id in dict.fromkeys(int(i) for i in entity_ids):
            rows = self._all(f"SELECT mem_id FROM mentions WHERE entity_id = ? AND tenant = ? AND {VISIBLE} "
                             "ORDER BY ts_us DESC, mem_id DESC LIMIT ?",
                             (entity_id, tenant, viewer_key(viewer), -1 if limit is None else limit))
            if rows:
                out[entity_id] = [int(r[0]) for r in rows]
        return out

    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        wanted = list(dict.fromkeys(int(i) for i in entity_ids))
        if not wanted:
            return {}
        # the kept counts (step 7): the shared and the viewer's private count of each entity, two key reads
        # (counted from the index up to ``cap``, a hub entity cost cap steps: 4k at 1M memories)
        rows = self._all("SELECT CAST(e.value AS INTEGER), (SELECT coalesce(sum(c.n), 0) FROM counts c WHERE "
                         "c.tenant = ? AND c.scope = 'mention' AND c.key IN (e.value || char(31), "
                         "e.value || char(31) || ?)) FROM json_each(?) AS e",
                         (tenant, viewer_key(viewer), json.dumps(wanted)))
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for chunk in chunks(mem_ids):
            # by the primary key: "+tenant" keeps the planner off the tenant index, which scanned every
            # mention of the tenant (a check on each row found, as for memories)
            for mem_id, entity_id in self._all(f"SELECT mem_id, entity_id FROM mentions WHERE mem_id IN "
                                               f"({qmarks(len(chunk))}) AND +tenant = ? ORDER BY mem_id, entity_id",
                                               [*chunk, tenant]):
                out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        seen: dict[EntityRelation, None] = {}
        for chunk in chunks(entity_ids):
            marks = qmarks(len(chunk))
            for row in self._all(f"SELECT src, dst, label, mem_id FROM relations WHERE (src IN ({marks}) OR dst IN "
                                 f"({marks})) AND tenant = ? AND {VISIBLE} ORDER BY src, dst, label, mem_id",
                                 [*chunk, *chunk, tenant, viewer_key(viewer)]):
                seen[EntityRelation(int(row[0]), int(row[1]), str(row[2]), int(row[3]))] = None
        return list(seen)

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        if ids is None:
            rows = self._all("SELECT id, name, kind, created_us FROM entities WHERE tenant = ? ORDER BY id", (tenant,))
        else:
            rows = sorted((tuple(r) for chunk in chunks(ids) for r in self._all(
                f"SELECT id, name, kind, created_us FROM entities WHERE tenant = ? AND id IN ({qmarks(len(chunk))})",
                [tenant, *chunk])), key=lambda r: int(r[0]))
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[tuple[int, str], frozenset[str]]:
        out: dict[tuple[int, str], set[str]] = {}
        for entity_id, alias, viewer in self._all(
                "SELECT a.entity_id, a.alias, s.viewer FROM entity_aliases a JOIN alias_seen s ON s.tenant = a.tenant "
                "AND s.norm = a.norm WHERE a.tenant = ?", (tenant,)):
            out.setdefault((int(entity_id), entity_norm(str(alias))), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self._all(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = ? ORDER BY mem_id, entity_id", (tenant,))]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self._all(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = ? ORDER BY src, dst, label, mem_id",
            (tenant,))]

