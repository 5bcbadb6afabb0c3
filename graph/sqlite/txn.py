"""One SQLite write transaction of the graph store (:class:`graph.api.GraphTxn`).

Everything one memory needs is written here in a single transaction: its row, its AGENT
and SESSION nodes and both edges, its FTS row and lexical window, and the counts that reads
use instead of a resident graph. What the store caches follows only after the commit (see
:class:`Effects`): a rolled-back transaction leaves no trace in memory either.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from graph.api import (
    AGENT,
    AUTHORED_BY,
    IN_SESSION,
    MEMORY_COLUMNS,
    MEMORY_STATE_FIELDS,
    REWRITE_FIELDS,
    SESSION,
    SUMMARIZES,
    EntityRecord,
    EntityRelation,
    EntitySpec,
    MemoryNode,
    MemoryRecord,
    RelationSpec,
    agent_node,
    entity_norm,
    ep_node,
    mem_node,
    session_node,
)
from graph.entity_link import Writer, link, seen_by
from graph.entity_values import private_key
from graph.keys import count_keys
from graph.sqlite.db import GraphDB
from graph.sqlite.entities import lookup_keys_with, qmarks
from graph.sqlite.migrations import COUNT_SCOPES_SQL
from graph.sqlite.rows import EPISODE_COLUMNS, NODE_SELECT, cached_node, memory_values, node_from_row

_INSERT_MEMORY = f"INSERT INTO memories ({', '.join(MEMORY_COLUMNS)}) VALUES ({', '.join('?' * len(MEMORY_COLUMNS))})"


@dataclass
class Effects:
    """What the store's caches must learn once the transaction has committed."""

    written: list[MemoryNode] = field(default_factory=list)
    erased: list[tuple[str, int]] = field(default_factory=list)
    sessions: set[tuple[str, str]] = field(default_factory=set)  # (tenant, session) of the erased memories
    agents: list[tuple[str, str]] = field(default_factory=list)
    tenants: set[str] = field(default_factory=set)


class SqliteTxn:
    def __init__(self, db: GraphDB, cur: sqlite3.Cursor) -> None:
        self.db = db
        self.cur = cur
        self.effects = Effects()

    # ---- ids ---------------------------------------------------------------------------------
    def allocate_ids(self, n: int) -> list[int]:
        return self.db.allocate_ids(self.cur, n)

    def _touched(self, tenant: str) -> None:
        self.effects.tenants.add(tenant)

    def reserve_ids_through(self, item_id: int) -> None:
        self.db.reserve_ids_through(self.cur, item_id)

    def id_in_use(self, item_id: int) -> bool:
        return self.db.id_in_use(self.cur, item_id)

    # ---- journal and meta --------------------------------------------------------------------
    def journal(self, entries: Iterable[tuple[str, str, str]], now_us: int | None = None) -> None:
        import time

        stamp = time.time_ns() // 1000 if now_us is None else now_us
        self.cur.executemany("INSERT INTO journal (op, tenant, item_id, created_us) VALUES (?, ?, ?, ?)",
                             [(op, tenant, ref, stamp) for op, tenant, ref in entries])

    def clear_journal(self, op: str, refs: Iterable[str]) -> int:
        self.cur.executemany("DELETE FROM journal WHERE op = ? AND item_id = ?", [(op, r) for r in refs])
        return max(0, self.cur.rowcount)  # one process writes the file: every intent is its own

    def clear_journal_seqs(self, seqs: Iterable[int]) -> None:
        self.cur.executemany("DELETE FROM journal WHERE seq = ?", [(s,) for s in seqs])

    def set_meta(self, key: str, value: str, *, overwrite: bool) -> None:
        verb = "INSERT OR REPLACE" if overwrite else "INSERT OR IGNORE"
        self.cur.execute(f"{verb} INTO meta (key, value) VALUES (?, ?)", (key, value))

    def rebuild_counts(self) -> None:
        """Recount every tenant's rows (doctor: counts that disagree with the rows)."""
        self.cur.execute("DELETE FROM counts")
        self.cur.execute(f"INSERT INTO counts (tenant, scope, key, n) {COUNT_SCOPES_SQL}")
        self.effects.tenants.update(self._all_tenants())

    # ---- memories ----------------------------------------------------------------------------
    def lock_memories(self, rows: Sequence[MemoryRecord]) -> None:
        """Nothing to take: one process writes the file, one transaction at a time."""

    def duplicate_of(self, row: MemoryRecord, window_us: int, corrects: int | None = None) -> int | None:
        n = row.node
        found = self.cur.execute(
            "SELECT id FROM memories WHERE tenant = ? AND session = ? AND content_hash = ? "
            "AND ts_us BETWEEN ? AND ? AND (visibility != 'agent' OR agent = ?) "
            "AND valid_to_us IS NULL AND id IS NOT ? "
            "ORDER BY ts_us DESC, id DESC LIMIT 1",
            (n.tenant, n.session, n.content_hash, n.ts_us - window_us, n.ts_us + window_us, n.agent, corrects),
        ).fetchone()
        return None if found is None else int(found[0])

    def write_memory(self, row: MemoryRecord) -> None:
        """Insert the memory row, its AGENT/SESSION nodes, both edges, its FTS and window rows, its counts."""
        cur, n = self.cur, row.node
        tenant = n.tenant
        cur.execute(_INSERT_MEMORY, memory_values(row))
        a_node, s_node, m_node = agent_node(tenant, n.agent), session_node(tenant, n.session), mem_node(n.id)
        cur.execute("INSERT OR IGNORE INTO nodes (node_id, kind, tenant, attrs) VALUES (?, ?, ?, ?)",
                    (a_node, AGENT, tenant, json.dumps({"agent": n.agent})))
        if cur.rowcount:
            self.effects.agents.append((tenant, n.agent))
        cur.execute("INSERT OR IGNORE INTO nodes (node_id, kind, tenant, attrs) VALUES (?, ?, ?, ?)",
                    (s_node, SESSION, tenant, json.dumps({"session": n.session})))
        cur.executemany("INSERT OR IGNORE INTO edges (src, dst, kind, tenant) VALUES (?, ?, ?, ?)",
                        [(m_node, a_node, AUTHORED_BY, tenant), (m_node, s_node, IN_SESSION, tenant)])
        fts = self.db.fts_table(cur, tenant, create=True)
        cur.execute(f"INSERT INTO {fts} (rowid, content) VALUES (?, ?)", (n.id, row.content))
        self._write_window(row)
        self._count(tenant, count_keys(n.session, n.type, n.agent, n.channel, n.visibility, n.ts_us), 1)
        self.effects.written.append(cached_node(n))
        self.effects.tenants.add(tenant)

    def erase_memory(self, tenant: str, mem_id: int) -> bool:
        """Delete the memory row, its edges (MENTIONS and the RELATED it declared too), FTS and window
        rows and counts; AGENT/SESSION nodes and ENTITY rows stay."""
        cur = self.cur
        found = cur.execute(
            "SELECT content, session, agent, type, channel, visibility, ts_us FROM memories "
            "WHERE id = ? AND tenant = ?", (mem_id, tenant),
        ).fetchone()
        if found is None:
            return False
        fts = self.db.fts_table(cur, tenant, create=False)
        if fts is not None:
            cur.execute(f"INSERT INTO {fts} ({fts}, rowid, content) VALUES ('delete', ?, ?)", (mem_id, found[0]))
        self._erase_window(tenant, mem_id, found[1], (found[6], mem_id))
        node = mem_node(mem_id)
        cur.execute("DELETE FROM edges WHERE src = ? OR dst = ?", (node, node))
        self.erase_entity_rows(mem_id)
        cur.execute("DELETE FROM memories WHERE id = ?", (mem_id,))
        _content, session, agent, type_, channel, visibility, ts_us = found
        self._count(tenant, count_keys(session, type_, agent, channel, visibility, ts_us), -1)
        self.effects.erased.append((tenant, mem_id))
        self.effects.sessions.add((tenant, str(found[1])))
        self.effects.tenants.add(tenant)
        return True

    def supersede_memory(self, tenant: str, mem_id: int, valid_to_us: int) -> bool:
        """End a current, unlocked memory's validity (the guard is in the UPDATE: no race)."""
        self.cur.execute("UPDATE memories SET valid_to_us = ? WHERE id = ? AND tenant = ? AND valid_to_us IS NULL "
                         "AND locked = 0", (valid_to_us, mem_id, tenant))
        return self._state_written(tenant, mem_id)

    def end_memory(self, tenant: str, mem_id: int, valid_to_us: int | None, reason: str | None,
                   by: str | None) -> bool:
        """End (or revive) a memory, guarded in the UPDATE (see graph.api.GraphTxn.end_memory)."""
        guard = "valid_to_us IS NULL" if valid_to_us is not None else "end_reason IS NOT NULL"
        self.cur.execute(f"UPDATE memories SET valid_to_us = ?, end_reason = ?, ended_by = ? WHERE id = ? AND "
                         f"tenant = ? AND {guard} AND locked = 0", (valid_to_us, reason, by, mem_id, tenant))
        return self._state_written(tenant, mem_id)

    def set_memory_state(self, tenant: str, mem_id: int, state: Mapping[str, Any]) -> bool:
        unknown = set(state) - set(MEMORY_STATE_FIELDS)
        if unknown:
            raise ValueError(f"not a memory state field: {sorted(unknown)}")
        if not state:
            return self.cur.execute("SELECT 1 FROM memories WHERE id = ? AND tenant = ?",
                                    (mem_id, tenant)).fetchone() is not None
        values = [int(bool(v)) if k == "locked" else v for k, v in state.items()]
        sets = ", ".join(f"{k} = ?" for k in state)
        self.cur.execute(f"UPDATE memories SET {sets} WHERE id = ? AND tenant = ?", (*values, mem_id, tenant))
        return self._state_written(tenant, mem_id)

    def rewrite_memory(self, tenant: str, mem_id: int, changes: Mapping[str, Any]) -> bool:
        """Replace text fields of a memory in place; its FTS row, its window row and the next row's
        window (when this one is shared) follow in this transaction."""
        unknown = set(changes) - set(REWRITE_FIELDS)
        if unknown:
            raise ValueError(f"not a rewritable memory field: {sorted(unknown)}")
        cur = self.cur
        found = cur.execute("SELECT content, session, ts_us, visibility FROM memories WHERE id = ? AND tenant = ?",
                            (mem_id, tenant)).fetchone()
        if found is None:
            return False
        if not changes:
            return True
        old, session, ts_us, visibility = found
        values = [json.dumps(v, ensure_ascii=False) if k in ("metadata", "source") else v for k, v in changes.items()]
        sets = ", ".join(f"{k} = ?" for k in changes)
        cur.execute(f"UPDATE memories SET {sets} WHERE id = ? AND tenant = ?", (*values, mem_id, tenant))
        if "content" in changes and changes["content"] != old:
            new = changes["content"]
            fts = self.db.fts_table(cur, tenant, create=False)
            if fts is not None:
                cur.execute(f"INSERT INTO {fts} ({fts}, rowid, content) VALUES ('delete', ?, ?)", (mem_id, old))
                cur.execute(f"INSERT INTO {fts} (rowid, content) VALUES (?, ?)", (mem_id, new))
            win = self.db.window_table(cur, tenant, create=False)
            if win is not None:
                cur.execute(f"UPDATE {win} SET content = ? WHERE rowid = ?", (new, mem_id))
                nxt = self._adjacent(tenant, session, (ts_us, mem_id), after=True)
                if nxt is not None and visibility == "tenant":  # the next row's window holds this text
                    cur.execute(f"UPDATE {win} SET prev = ? WHERE rowid = ?", (new, nxt[0]))
        row = cur.execute(f"SELECT {NODE_SELECT} FROM memories WHERE id = ?", (mem_id,)).fetchone()
        self.effects.written.append(node_from_row(tuple(row)))
        self.effects.tenants.add(tenant)
        return True

    def _state_written(self, tenant: str, mem_id: int) -> bool:
        """After an UPDATE of one row's state: the cache learns the new node at commit."""
        if not self.cur.rowcount:
            return False
        row = self.cur.execute(f"SELECT {NODE_SELECT} FROM memories WHERE id = ?", (mem_id,)).fetchone()
        self.effects.written.append(node_from_row(tuple(row)))
        self.effects.tenants.add(tenant)
        return True

    def _count(self, tenant: str, keys: list[tuple[str, str]], delta: int) -> None:
        self.cur.executemany(
            "INSERT INTO counts (tenant, scope, key, n) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (tenant, scope, key) DO UPDATE SET n = n + excluded.n",
            [(tenant, scope, key, delta) for scope, key in keys],
        )
        if delta < 0:
            self.cur.executemany("DELETE FROM counts WHERE tenant = ? AND scope = ? AND key = ? AND n <= 0",
                                 [(tenant, scope, key) for scope, key in keys])

    # ---- lexical window (graph.sqlite.db.WINDOW_ROWS_SQL is the exact expected content) -------------
    def _adjacent(self, tenant: str, session: str, key: tuple[int, int], after: bool) -> Any:
        """The memory right before/after ``key`` in the session: two index seeks (a row-value
        range would scan every row sharing the timestamp)."""
        op, order = (">", "ASC") if after else ("<", "DESC")
        cols = "SELECT id, content, visibility FROM memories WHERE tenant = ? AND session = ? AND "
        found = self.cur.execute(f"{cols} ts_us = ? AND id {op} ? ORDER BY id {order} LIMIT 1",
                                 (tenant, session, *key)).fetchone()
        if found is None:
            found = self.cur.execute(f"{cols} ts_us {op} ? ORDER BY ts_us {order}, id {order} LIMIT 1",
                                     (tenant, session, key[0])).fetchone()
        return found

    def _write_window(self, row: MemoryRecord) -> None:
        """Index the row with its predecessor's text; a later row of the session now follows it."""
        n = row.node
        win = self.db.window_table(self.cur, n.tenant, create=True)
        key = (n.ts_us, n.id)
        prev = self._adjacent(n.tenant, n.session, key, after=False)
        self.cur.execute(f"INSERT INTO {win} (rowid, content, prev) VALUES (?, ?, ?)",
                         (n.id, row.content, _shared_text(prev)))
        nxt = self._adjacent(n.tenant, n.session, key, after=True)
        if nxt is not None:  # an out-of-order insert: the next row's window now starts here
            shared = row.content if n.visibility == "tenant" else ""
            self.cur.execute(f"UPDATE {win} SET prev = ? WHERE rowid = ?", (shared, nxt[0]))

    def _erase_window(self, tenant: str, mem_id: int, session: str, key: tuple[int, int]) -> None:
        win = self.db.window_table(self.cur, tenant, create=False)
        if win is None:
            return
        self.cur.execute(f"DELETE FROM {win} WHERE rowid = ?", (mem_id,))
        nxt = self._adjacent(tenant, session, key, after=True)
        if nxt is not None:  # the deleted text leaves the next row's window too
            prev = self._adjacent(tenant, session, key, after=False)
            self.cur.execute(f"UPDATE {win} SET prev = ? WHERE rowid = ?", (_shared_text(prev), nxt[0]))

    # ---- edges, episodes -------------------------------------------------------------------
    def write_edge(self, tenant: str, src: str, dst: str, kind: str) -> None:
        self.cur.execute("INSERT OR IGNORE INTO edges (src, dst, kind, tenant) VALUES (?, ?, ?, ?)",
                         (src, dst, kind, tenant))
        self.effects.tenants.add(tenant)

    def erase_edges(self, edges: Iterable[tuple[str, str, str]]) -> None:
        self.cur.executemany("DELETE FROM edges WHERE src = ? AND dst = ? AND kind = ?", list(edges))
        self.effects.tenants.update(self._all_tenants())

    def _all_tenants(self) -> list[str]:
        return [str(r[0]) for r in self.cur.execute("SELECT DISTINCT tenant FROM counts")]

    def write_episode(self, row: Mapping[str, Any]) -> None:
        """Insert or refresh the session's EPISODE row and its SUMMARIZES edge."""
        cols = ", ".join(EPISODE_COLUMNS)
        self.cur.execute(
            f"INSERT OR REPLACE INTO episodes ({cols}) VALUES ({', '.join('?' * len(EPISODE_COLUMNS))})",
            [row[c] for c in EPISODE_COLUMNS],
        )
        self.write_edge(row["tenant"], ep_node(row["id"]), session_node(row["tenant"], row["session"]), SUMMARIZES)

    # ---- entity rows (graph.entity_link's EntityRows) ----------------------------------------------
    # ---- graph.entity_link.EntityRows ----------------------------------------------------------
    def lookup_keys(self, tenant: str, keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
        return lookup_keys_with(lambda q, args: self.cur.execute(q, args).fetchall(), tenant, keys)

    def rekey_private(self, tenant: str, norm: str) -> None:
        row = self.cur.execute("SELECT entity_id, alias, pos FROM entity_aliases WHERE tenant = ? AND norm = ?",
                               (tenant, norm)).fetchone()
        if row is None:
            return
        viewers = [str(v) for (v,) in self.cur.execute("SELECT viewer FROM alias_seen WHERE tenant = ? AND norm = ?",
                                                       (tenant, norm)).fetchall() if v]
        for viewer in viewers or [""]:  # '' : a key no viewer resolves (the name was restored without readers)
            key = private_key(viewer, norm)
            self.cur.execute("INSERT OR IGNORE INTO entity_aliases (tenant, norm, entity_id, alias, pos) "
                             "VALUES (?, ?, ?, ?, ?)", (tenant, key, row[0], row[1], row[2]))
            if viewer:
                self.cur.execute("INSERT OR IGNORE INTO alias_seen (tenant, norm, viewer) VALUES (?, ?, ?)",
                                 (tenant, key, viewer))
        self.cur.execute("DELETE FROM entity_aliases WHERE tenant = ? AND norm = ?", (tenant, norm))
        self.cur.execute("DELETE FROM alias_seen WHERE tenant = ? AND norm = ?", (tenant, norm))

    def create_entity(self, tenant: str, name: str, kind: str | None, now_us: int) -> int:
        entity_id = self.allocate_ids(1)[0]
        self.cur.execute("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (?, ?, ?, ?, ?)",
                         (entity_id, tenant, name, kind, now_us))
        return entity_id

    def add_alias(self, tenant: str, entity_id: int, norm: str, alias: str) -> int:
        self.cur.execute("INSERT OR IGNORE INTO entity_aliases (tenant, norm, entity_id, alias, pos) VALUES "
                         "(?, ?, ?, ?, (SELECT coalesce(max(pos), -1) + 1 FROM entity_aliases WHERE entity_id = ?))",
                         (tenant, norm, entity_id, alias, entity_id))
        if self.cur.rowcount:
            return entity_id
        return int(self.cur.execute("SELECT entity_id FROM entity_aliases WHERE tenant = ? AND norm = ?",
                                    (tenant, norm)).fetchone()[0])

    def drop_entity(self, tenant: str, entity_id: int) -> None:
        self.cur.execute("DELETE FROM entities WHERE id = ? AND tenant = ?", (entity_id, tenant))

    def fill_kind(self, tenant: str, entity_id: int, kind: str) -> None:
        self.cur.execute("UPDATE entities SET kind = ? WHERE id = ? AND tenant = ? AND kind IS NULL",
                         (kind, entity_id, tenant))

    def see_aliases(self, tenant: str, viewer: str, norms: Sequence[str]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO alias_seen (tenant, norm, viewer) VALUES (?, ?, ?)",
                             [(tenant, n, viewer) for n in norms])

    def write_mentions(self, tenant: str, writer: Writer, entity_ids: Sequence[int]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             [(writer.mem_id, e, tenant, writer.ts_us, int(writer.shared), writer.agent)
                              for e in entity_ids])

    def write_relations(self, tenant: str, writer: Writer, rows: Sequence[tuple[int, int, str]]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO relations (src, dst, label, mem_id, tenant, shared, agent) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(s, d, label, writer.mem_id, tenant, int(writer.shared), writer.agent)
                              for s, d, label in rows])

    # ---- graph.api.GraphTxn ------------------------------------------------------------------
    def _writer(self, tenant: str, mem_id: int) -> Writer | None:
        found = self.cur.execute("SELECT ts_us, visibility, agent FROM memories WHERE id = ? AND tenant = ?",
                                 (mem_id, tenant)).fetchone()
        return None if found is None else Writer(mem_id, int(found[0]), found[1] == "tenant", str(found[2]))

    def link_entities(self, tenant: str, mem_id: int, entities: Sequence[EntitySpec],
                      relations: Sequence[RelationSpec], now_us: int) -> list[int]:
        writer = self._writer(tenant, mem_id)
        if writer is None or not (entities or relations):
            return []
        self._touched(tenant)
        return link(self, tenant, writer, entities, relations, now_us)

    def _entity_tenant_ok(self, tenant: str, *ids: int) -> bool:
        rows = self.cur.execute(f"SELECT count(*) FROM entities WHERE tenant = ? AND id IN ({qmarks(len(ids))})",
                                [tenant, *ids]).fetchone()
        return int(rows[0]) == len(set(ids))

    def merge_entities(self, tenant: str, keep: int, merge: int) -> bool:
        if keep == merge or not self._entity_tenant_ok(tenant, keep, merge):
            return False
        cur = self.cur
        top = int(cur.execute("SELECT coalesce(max(pos), -1) FROM entity_aliases WHERE entity_id = ?",
                              (keep,)).fetchone()[0])
        cur.execute("UPDATE entity_aliases SET entity_id = ?, pos = pos + ? WHERE entity_id = ?",
                    (keep, top + 1, merge))
        cur.execute("INSERT OR IGNORE INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) "
                    "SELECT mem_id, ?, tenant, ts_us, shared, agent FROM mentions WHERE entity_id = ?", (keep, merge))
        cur.execute("DELETE FROM mentions WHERE entity_id = ?", (merge,))
        cur.execute("INSERT OR IGNORE INTO relations (src, dst, label, mem_id, tenant, shared, agent) "
                    "SELECT CASE src WHEN ? THEN ? ELSE src END, CASE dst WHEN ? THEN ? ELSE dst END, label, mem_id, "
                    "tenant, shared, agent FROM relations WHERE (src = ? OR dst = ?) AND tenant = ?",
                    (merge, keep, merge, keep, merge, merge, tenant))
        cur.execute("DELETE FROM relations WHERE (src = ? OR dst = ?) AND tenant = ?", (merge, merge, tenant))
        cur.execute("DELETE FROM relations WHERE src = ? AND dst = ?", (keep, keep))
        cur.execute("UPDATE entities SET kind = (SELECT kind FROM entities WHERE id = ?) WHERE id = ? AND kind IS NULL",
                    (merge, keep))
        cur.execute("DELETE FROM entities WHERE id = ?", (merge,))
        self._touched(tenant)
        return True

    def restore_entity(self, tenant: str, record: EntityRecord) -> bool:
        owner = self.cur.execute("SELECT tenant FROM entities WHERE id = ?", (record.id,)).fetchone()
        if owner is not None and owner[0] != tenant:
            return False
        if owner is None:
            self.cur.execute("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (?, ?, ?, ?, ?)",
                             (record.id, tenant, record.name, record.kind, record.created_us))
        elif record.kind:
            self.fill_kind(tenant, record.id, record.kind)
        for alias in (record.name, *record.aliases):
            self.add_alias(tenant, record.id, entity_norm(alias), alias)
        self._touched(tenant)
        return owner is None

    def restore_mentions(self, tenant: str, mem_id: int, entity_ids: Sequence[int]) -> int:
        writer = self._writer(tenant, mem_id)
        wanted = [e for e in dict.fromkeys(entity_ids) if self._entity_tenant_ok(tenant, e)]
        if writer is None or not wanted:
            return 0
        self.write_mentions(tenant, writer, wanted)
        self._touched(tenant)
        return max(0, self.cur.rowcount)  # the rows this statement wrote (total_changes counts its triggers' too)

    def restore_alias_views(self, tenant: str, mem_id: int, names: Sequence[str]) -> None:
        writer = self._writer(tenant, mem_id)
        if writer is not None and names:
            self.see_aliases(tenant, seen_by(writer), list(dict.fromkeys(entity_norm(n) for n in names)))

    def restore_relations(self, tenant: str, relations: Sequence[EntityRelation]) -> int:
        written = 0
        for rel in relations:
            writer = self._writer(tenant, rel.mem_id)
            if writer is None or rel.src == rel.dst or not self._entity_tenant_ok(tenant, rel.src, rel.dst):
                continue
            before = self.cur.connection.total_changes
            self.write_relations(tenant, writer, [(rel.src, rel.dst, rel.label)])
            written += self.cur.connection.total_changes - before
        if written:
            self._touched(tenant)
        return written

    def erase_entity_links(self, tenant: str, mentions: Sequence[tuple[int, int]],
                           relations: Sequence[EntityRelation]) -> int:
        gone = 0
        for mem_id, entity_id in mentions:
            gone += self.cur.execute("DELETE FROM mentions WHERE mem_id = ? AND entity_id = ? AND tenant = ?",
                                     (mem_id, entity_id, tenant)).rowcount
        for r in relations:
            gone += self.cur.execute("DELETE FROM relations WHERE src = ? AND dst = ? AND label = ? AND mem_id = ? "
                                     "AND tenant = ?", (r.src, r.dst, r.label, r.mem_id, tenant)).rowcount
        self._touched(tenant)
        return gone

    def erase_entity(self, tenant: str, entity_id: int) -> bool:
        cur = self.cur
        if cur.execute("SELECT 1 FROM entities WHERE id = ? AND tenant = ?", (entity_id, tenant)).fetchone() is None:
            return False
        norms = [str(r[0]) for r in cur.execute("SELECT norm FROM entity_aliases WHERE entity_id = ? AND tenant = ?",
                                                (entity_id, tenant))]
        cur.executemany("DELETE FROM alias_seen WHERE tenant = ? AND norm = ?", [(tenant, n) for n in norms])
        cur.execute("DELETE FROM entity_aliases WHERE entity_id = ? AND tenant = ?", (entity_id, tenant))
        cur.execute("DELETE FROM mentions WHERE entity_id = ? AND tenant = ?", (entity_id, tenant))
        cur.execute("DELETE FROM relations WHERE (src = ? OR dst = ?) AND tenant = ?", (entity_id, entity_id, tenant))
        cur.execute("DELETE FROM entities WHERE id = ? AND tenant = ?", (entity_id, tenant))
        self._touched(tenant)
        return True

    def erase_entity_rows(self, mem_id: int) -> None:
        """A deleted memory's MENTIONS and the RELATED edges it declared (its entities stay)."""
        self.cur.execute("DELETE FROM mentions WHERE mem_id = ?", (mem_id,))
        self.cur.execute("DELETE FROM relations WHERE mem_id = ?", (mem_id,))


def _shared_text(adjacent: Any) -> str:
    """A neighbour's text for a window: only shared memories lend their words."""
    return str(adjacent[1]) if adjacent is not None and adjacent[2] == "tenant" else ""
