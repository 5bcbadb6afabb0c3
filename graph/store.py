"""The graph store: a networkx MultiDiGraph rebuilt at open from the SQLite store.

Node ids: ``mem:<id>`` (AGENT_MEMORY), ``ep:<id>`` (EPISODE), ``agent:<tenant>/<agent>``
(AGENT), ``session:<tenant>/<session>`` (SESSION). Edges: AUTHORED_BY and IN_SESSION
from every memory; episodes add SUMMARIZES; handoffs add SUPERSEDES. Every node carries
its ``tenant`` and every read here takes one, so graph walks never cross tenants.

Writes come in two halves: ``write_*`` runs inside the caller's SQLite transaction,
``apply_*`` updates the in-memory graph after that transaction committed.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from collections.abc import Iterable
from typing import Any

import networkx as nx

from graph.agent_names import AgentNameIndex
from graph.db import GraphDB
from graph.field_index import FieldIndex
from graph.session_index import Key, SessionIndex

AGENT_MEMORY = "AGENT_MEMORY"
AGENT = "AGENT"
SESSION = "SESSION"
EPISODE = "EPISODE"
AUTHORED_BY = "AUTHORED_BY"
IN_SESSION = "IN_SESSION"
SUMMARIZES = "SUMMARIZES"
SUPERSEDES = "SUPERSEDES"

EPISODE_COLUMNS = (
    "id", "tenant", "session", "summary", "summary_source", "summary_error", "first_id", "last_id",
    "turn_count", "last_ts_us", "handoff_id", "created_us", "updated_us",
)

MEMORY_COLUMNS = (
    "id", "tenant", "session", "agent", "type", "role", "channel", "source", "source_id", "project_id",
    "salience", "visibility", "ts_us", "metadata", "content", "content_len", "content_hash", "idempotency_key",
)
_ATTR_COLUMNS = tuple(c for c in MEMORY_COLUMNS if c not in ("content", "idempotency_key"))


def agent_node(tenant: str, agent: str) -> str:
    return f"agent:{tenant}/{agent}"


def session_node(tenant: str, session: str) -> str:
    return f"session:{tenant}/{session}"


def mem_node(mem_id: int) -> str:
    return f"mem:{mem_id}"


def ep_node(ep_id: int) -> str:
    return f"ep:{ep_id}"


class GraphStore:
    """In-memory graph + ordered session indexes over a durable :class:`GraphDB`."""

    def __init__(self, db: GraphDB) -> None:
        self.db = db
        self.graph: nx.MultiDiGraph = nx.MultiDiGraph()
        self.all_index = SessionIndex()
        self.turn_index = SessionIndex()
        self.tenant_index = SessionIndex()  # session key "" : every memory of the tenant by time
        self._memory_count: dict[str, int] = {}
        self._private: dict[tuple[str, str], Counter[str]] = {}  # (tenant, session) -> author -> private rows
        self._other_count: dict[str, int] = {}  # memories that are not dialogue turns, per tenant
        self.fields = FieldIndex().loaded()  # ids by type/agent/channel/source id; channels per session
        self._agents: dict[str, AgentNameIndex] = {}  # tenant -> its agents, indexed by name
        self.load()

    # ---- loading -------------------------------------------------------------------------
    def load(self) -> None:
        """Rebuild the in-memory graph and indexes from SQLite."""
        g = nx.MultiDiGraph()
        all_keys: dict[tuple[str, str], list[Key]] = {}
        turn_keys: dict[tuple[str, str], list[Key]] = {}
        counts: dict[str, int] = {}
        private: dict[tuple[str, str], Counter[str]] = {}
        others: dict[str, int] = {}
        fields = FieldIndex()
        with self.db.lock:
            conn = self.db.conn
            for row in conn.execute("SELECT node_id, kind, tenant, attrs FROM nodes"):
                g.add_node(row[0], kind=row[1], tenant=row[2], **json.loads(row[3]))
            cols = ", ".join(_ATTR_COLUMNS)
            for row in conn.execute(f"SELECT {cols} FROM memories"):
                attrs = _attrs_from_row(row)
                node = mem_node(attrs["id"])
                g.add_node(node, **attrs)
                tenant, session, key = attrs["tenant"], attrs["session"], (attrs["ts_us"], attrs["id"])
                all_keys.setdefault((tenant, session), []).append(key)
                if attrs["type"] == "turn":
                    turn_keys.setdefault((tenant, session), []).append(key)
                counts[tenant] = counts.get(tenant, 0) + 1
                if attrs["visibility"] == "agent":
                    private.setdefault((tenant, session), Counter())[attrs["agent"]] += 1
                if attrs["type"] != "turn":
                    others[tenant] = others.get(tenant, 0) + 1
                fields.add(attrs)
            for row in conn.execute(f"SELECT {', '.join(EPISODE_COLUMNS)} FROM episodes"):
                attrs = dict(zip(EPISODE_COLUMNS, row, strict=True))
                g.add_node(ep_node(attrs["id"]), kind=EPISODE, **attrs)
            for src, dst, kind in conn.execute("SELECT src, dst, kind FROM edges"):
                g.add_edge(src, dst, key=kind, kind=kind)
        self.graph = g
        self._agents = {}
        for _node, attrs in g.nodes(data=True):
            if attrs.get("kind") == AGENT:
                self._agents.setdefault(attrs["tenant"], AgentNameIndex()).add(attrs["agent"])
        self.all_index, self.turn_index, self.tenant_index = SessionIndex(), SessionIndex(), SessionIndex()
        by_tenant: dict[str, list[Key]] = {}
        for (t, s), keys in all_keys.items():
            self.all_index.bulk_load(t, s, keys)
            by_tenant.setdefault(t, []).extend(keys)
        for t, keys in by_tenant.items():
            self.tenant_index.bulk_load(t, "", keys)
        for (t, s), keys in turn_keys.items():
            self.turn_index.bulk_load(t, s, keys)
        self._memory_count = counts
        self._private = private
        self._other_count = others
        self.fields = fields.loaded()
        self._heal_windows(counts)

    def _heal_windows(self, counts: dict[str, int]) -> None:
        """Rebuild a tenant's lexical window table whose row count disagrees with its memories
        (writes keep them in one transaction; this catches damage from outside)."""
        try:
            stale = [t for t, n in self.db.window_counts().items() if n != counts.get(t, 0)]
            if stale:
                with self.db.transaction() as cur:
                    for tenant in stale:
                        self.db.rebuild_window(cur, tenant)
        except sqlite3.Error:  # a read-only or damaged store: recall still works without it
            self.db.reload_fts_names()

    # ---- writes (inside the caller's transaction) ---------------------------------------------
    def write_memory(self, cur: sqlite3.Cursor, row: dict[str, Any]) -> None:
        """Insert the memory row, its AGENT/SESSION nodes, both edges and its FTS row."""
        tenant = row["tenant"]
        values = [row[c] for c in MEMORY_COLUMNS]
        values[MEMORY_COLUMNS.index("source")] = json.dumps(row["source"], ensure_ascii=False)
        values[MEMORY_COLUMNS.index("metadata")] = json.dumps(row["metadata"], ensure_ascii=False)
        cur.execute(
            f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) VALUES ({', '.join('?' * len(MEMORY_COLUMNS))})",
            values,
        )
        a_node, s_node, m_node = (
            agent_node(tenant, row["agent"]), session_node(tenant, row["session"]), mem_node(row["id"]),
        )
        cur.execute(
            "INSERT OR IGNORE INTO nodes (node_id, kind, tenant, attrs) VALUES (?, ?, ?, ?)",
            (a_node, AGENT, tenant, json.dumps({"agent": row["agent"]})),
        )
        cur.execute(
            "INSERT OR IGNORE INTO nodes (node_id, kind, tenant, attrs) VALUES (?, ?, ?, ?)",
            (s_node, SESSION, tenant, json.dumps({"session": row["session"]})),
        )
        cur.executemany(
            "INSERT OR IGNORE INTO edges (src, dst, kind, tenant) VALUES (?, ?, ?, ?)",
            [(m_node, a_node, AUTHORED_BY, tenant), (m_node, s_node, IN_SESSION, tenant)],
        )
        fts = self.db.fts_table(cur, tenant, create=True)
        cur.execute(f"INSERT INTO {fts} (rowid, content) VALUES (?, ?)", (row["id"], row["content"]))
        self._write_window(cur, tenant, row)

    # ---- lexical window (graph.db.WINDOW_ROWS_SQL is the exact expected content) -----------
    @staticmethod
    def _adjacent(cur: sqlite3.Cursor, tenant: str, session: str, key: tuple[int, int], after: bool) -> Any:
        """The memory right before/after ``key`` in the session: two index seeks (a row-value
        range would scan every row sharing the timestamp)."""
        op, order = (">", "ASC") if after else ("<", "DESC")
        cols = "SELECT id, content, visibility FROM memories WHERE tenant = ? AND session = ? AND "
        found = cur.execute(f"{cols} ts_us = ? AND id {op} ? ORDER BY id {order} LIMIT 1",
                            (tenant, session, *key)).fetchone()
        if found is None:
            found = cur.execute(f"{cols} ts_us {op} ? ORDER BY ts_us {order}, id {order} LIMIT 1",
                                (tenant, session, key[0])).fetchone()
        return found

    def _write_window(self, cur: sqlite3.Cursor, tenant: str, row: dict[str, Any]) -> None:
        """Index the row with its predecessor's text; a later row of the session now follows it."""
        win = self.db.window_table(cur, tenant, create=True)
        key = (row["ts_us"], row["id"])
        prev = self._adjacent(cur, tenant, row["session"], key, after=False)
        cur.execute(f"INSERT INTO {win} (rowid, content, prev) VALUES (?, ?, ?)",
                    (row["id"], row["content"], _shared_text(prev)))
        nxt = self._adjacent(cur, tenant, row["session"], key, after=True)
        if nxt is not None:  # an out-of-order insert: the next row's window now starts here
            shared = row["content"] if row["visibility"] == "tenant" else ""
            cur.execute(f"UPDATE {win} SET prev = ? WHERE rowid = ?", (shared, nxt[0]))

    def _erase_window(self, cur: sqlite3.Cursor, tenant: str, mem_id: int) -> None:
        win = self.db.window_table(cur, tenant, create=False)
        found = cur.execute("SELECT session, ts_us FROM memories WHERE id = ?", (mem_id,)).fetchone()
        if win is None or found is None:
            return
        key = (found[1], mem_id)
        cur.execute(f"DELETE FROM {win} WHERE rowid = ?", (mem_id,))
        nxt = self._adjacent(cur, tenant, found[0], key, after=True)
        if nxt is not None:  # the deleted text leaves the next row's window too
            prev = self._adjacent(cur, tenant, found[0], key, after=False)
            cur.execute(f"UPDATE {win} SET prev = ? WHERE rowid = ?", (_shared_text(prev), nxt[0]))

    def write_edge(self, cur: sqlite3.Cursor, tenant: str, src: str, dst: str, kind: str) -> None:
        cur.execute(
            "INSERT OR IGNORE INTO edges (src, dst, kind, tenant) VALUES (?, ?, ?, ?)", (src, dst, kind, tenant)
        )

    def erase_memory(self, cur: sqlite3.Cursor, tenant: str, mem_id: int) -> bool:
        """Delete the memory row, its edges and FTS rows; AGENT/SESSION nodes stay."""
        found = cur.execute(
            "SELECT content FROM memories WHERE id = ? AND tenant = ?", (mem_id, tenant)
        ).fetchone()
        if found is None:
            return False
        fts = self.db.fts_table(cur, tenant, create=False)
        if fts is not None:
            cur.execute(
                f"INSERT INTO {fts} ({fts}, rowid, content) VALUES ('delete', ?, ?)", (mem_id, found[0])
            )
        self._erase_window(cur, tenant, mem_id)
        node = mem_node(mem_id)
        cur.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (node, node))
        cur.execute("DELETE FROM memories WHERE id = ?", (mem_id,))
        return True

    def write_episode(self, cur: sqlite3.Cursor, row: dict[str, Any]) -> None:
        """Insert or refresh the session's EPISODE row and its SUMMARIZES edge."""
        cols = ", ".join(EPISODE_COLUMNS)
        cur.execute(
            f"INSERT OR REPLACE INTO episodes ({cols}) VALUES ({', '.join('?' * len(EPISODE_COLUMNS))})",
            [row[c] for c in EPISODE_COLUMNS],
        )
        self.write_edge(cur, row["tenant"], ep_node(row["id"]), session_node(row["tenant"], row["session"]),
                        SUMMARIZES)

    # ---- in-memory updates (after commit) ----------------------------------------------------
    def apply_memory(self, row: dict[str, Any]) -> None:
        tenant, session = row["tenant"], row["session"]
        attrs = {c: row[c] for c in _ATTR_COLUMNS}
        attrs["source"] = row["source"]
        attrs["metadata"] = row["metadata"]
        attrs["kind"] = AGENT_MEMORY
        m_node, a_node, s_node = mem_node(row["id"]), agent_node(tenant, row["agent"]), session_node(tenant, session)
        g = self.graph
        if a_node not in g:
            g.add_node(a_node, kind=AGENT, tenant=tenant, agent=row["agent"])
            self._agents.setdefault(tenant, AgentNameIndex()).add(row["agent"])
        if s_node not in g:
            g.add_node(s_node, kind=SESSION, tenant=tenant, session=session)
        g.add_node(m_node, **attrs)
        g.add_edge(m_node, a_node, key=AUTHORED_BY, kind=AUTHORED_BY)
        g.add_edge(m_node, s_node, key=IN_SESSION, kind=IN_SESSION)
        key = (row["ts_us"], row["id"])
        self.all_index.add(tenant, session, key)
        self.tenant_index.add(tenant, "", key)
        if row["type"] == "turn":
            self.turn_index.add(tenant, session, key)
        else:
            self._other_count[tenant] = self._other_count.get(tenant, 0) + 1
        self._memory_count[tenant] = self._memory_count.get(tenant, 0) + 1
        if row["visibility"] == "agent":
            self._private.setdefault((tenant, session), Counter())[row["agent"]] += 1
        self.fields.add(attrs)

    def apply_episode(self, row: dict[str, Any]) -> None:
        node = ep_node(row["id"])
        self.graph.add_node(node, kind=EPISODE, **{c: row[c] for c in EPISODE_COLUMNS})
        self.graph.add_edge(node, session_node(row["tenant"], row["session"]), key=SUMMARIZES, kind=SUMMARIZES)

    def apply_edge(self, src: str, dst: str, kind: str) -> None:
        self.graph.add_edge(src, dst, key=kind, kind=kind)

    def unapply_memory(self, mem_id: int) -> None:
        node = mem_node(mem_id)
        attrs = self.graph.nodes.get(node)
        if attrs is None:
            return
        tenant, session, key = attrs["tenant"], attrs["session"], (attrs["ts_us"], attrs["id"])
        self.all_index.remove(tenant, session, key)
        self.tenant_index.remove(tenant, "", key)
        if attrs["type"] == "turn":
            self.turn_index.remove(tenant, session, key)
        else:
            self._other_count[tenant] = max(0, self._other_count.get(tenant, 0) - 1)
        self.fields.remove(attrs)
        self.graph.remove_node(node)
        self._memory_count[tenant] = max(0, self._memory_count.get(tenant, 0) - 1)
        authors = self._private.get((tenant, session))
        if attrs["visibility"] == "agent" and authors is not None:
            authors[attrs["agent"]] -= 1
            if authors[attrs["agent"]] <= 0:
                del authors[attrs["agent"]]

    # ---- reads (always tenant-scoped) --------------------------------------------------------
    def memory(self, tenant: str, mem_id: int) -> dict[str, Any] | None:
        """The AGENT_MEMORY node's attributes, or None when absent or another tenant's."""
        # MultiDiGraph._node is networkx's node-attribute dict; reading it directly skips the
        # NodeView layers on the hottest lookup in recall (hundreds of calls a query)
        attrs = self.graph._node.get(f"mem:{mem_id}")
        if attrs is None or attrs.get("kind") != AGENT_MEMORY or attrs.get("tenant") != tenant:
            return None
        return attrs

    def episode(self, tenant: str, ep_id: int) -> dict[str, Any] | None:
        """The EPISODE node's attributes, or None when absent or another tenant's."""
        attrs = self.graph.nodes.get(ep_node(ep_id))
        if attrs is None or attrs.get("kind") != EPISODE or attrs.get("tenant") != tenant:
            return None
        return attrs

    def session_episode(self, tenant: str, session: str) -> dict[str, Any] | None:
        s_node = session_node(tenant, session)
        if s_node not in self.graph:
            return None
        for src, _dst, kind in self.graph.in_edges(s_node, keys=True):
            if kind == SUMMARIZES:
                return self.episode(tenant, int(src.split(":", 1)[1]))
        return None

    def memory_ids(self, tenant: str) -> Iterable[int]:
        for _node, attrs in self.graph.nodes(data=True):
            if attrs.get("kind") == AGENT_MEMORY and attrs.get("tenant") == tenant:
                yield attrs["id"]

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        """Full content of the tenant's memories among ``ids``."""
        ids = list(ids)
        out: dict[int, str] = {}
        with self.db.lock:
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                # look up by primary key; the tenant is checked on each row (an index on tenant
                # would make SQLite scan the tenant's rows instead)
                for mem_id, content, owner in self.db.conn.execute(
                    f"SELECT id, content, tenant FROM memories WHERE id IN ({marks})", chunk
                ):
                    if owner == tenant:
                        out[mem_id] = content
        return out

    def edges_of(self, tenant: str, node: str) -> list[tuple[str, str, str]]:
        """(direction, kind, other node) for every edge touching ``node`` inside the tenant."""
        g = self.graph
        if node not in g or g.nodes[node].get("tenant") != tenant:
            return []
        out = [("out", d["kind"], v) for _u, v, d in g.out_edges(node, data=True)]
        out += [("in", d["kind"], u) for u, _v, d in g.in_edges(node, data=True)]
        return [e for e in out if g.nodes[e[2]].get("tenant") == tenant]

    def agents(self, tenant: str) -> frozenset[str]:
        """Every agent that has written in the tenant (AGENT nodes)."""
        index = self._agents.get(tenant)
        return frozenset(index.names) if index else frozenset()

    def agent_names(self, tenant: str) -> AgentNameIndex:
        """The tenant's agent-name index (kept current on write; empty for an unknown tenant)."""
        return self._agents.get(tenant) or AgentNameIndex()

    def tenants(self) -> list[str]:
        return sorted(t for t, n in self._memory_count.items() if n > 0)

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        """How many of the session's memories are private to an agent other than ``viewer``."""
        authors = self._private.get((tenant, session))
        return sum(n for agent, n in authors.items() if agent != viewer) if authors else 0

    def memory_count(self, tenant: str) -> int:
        return self._memory_count.get(tenant, 0)

    def non_turn_count(self, tenant: str) -> int:
        """How many of the tenant's memories are not dialogue turns (notes, events, errors, …)."""
        return self._other_count.get(tenant, 0)


def _shared_text(adjacent: Any) -> str:
    """A neighbour's text for a window: only shared memories lend their words."""
    return str(adjacent[1]) if adjacent is not None and adjacent[2] == "tenant" else ""


def _attrs_from_row(row: sqlite3.Row | tuple[Any, ...]) -> dict[str, Any]:
    attrs = dict(zip(_ATTR_COLUMNS, row, strict=True))
    attrs["source"] = json.loads(attrs["source"])
    attrs["metadata"] = json.loads(attrs["metadata"])
    attrs["kind"] = AGENT_MEMORY
    return attrs
