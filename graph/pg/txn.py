"""One PostgreSQL write transaction (:class:`graph.api.GraphTxn`).

Every write also keeps, in the same transaction:
- the lexical window: a memory's ``prev`` is the text of the previous *shared* memory of its
  session by (ts_us, id); an insert or delete in the middle re-points the next row, exactly as
  ``graph/sqlite/txn.py`` keeps ``ftw_*``. Writes of one session are serialized by an advisory lock
  so two replicas never compute a window from each other's uncommitted rows;
- the counts (per tenant, per session, private rows per author, and the scoped counts of
  :mod:`graph.pg.counts`: type, agent, channel, channel sessions, UTC days), applied at commit as
  deltas, with the tenant's change counter ``tenant_state.version`` bumped once per touched
  tenant and ``tenant_state.changes`` by each memory written or erased (the lexical sample's clock).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from psycopg import Connection, sql

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
    MemoryRecord,
    RelationSpec,
    agent_node,
    entity_norm,
    mem_node,
    session_node,
)
from graph.entity_link import Writer, link, seen_by
from graph.entity_values import private_key
from graph.keys import SEP, count_keys, mention_key
from graph.pg import counts
from graph.pg.entities import COUNTED, KEYS_SQL, held_keys, id_list
from graph.pg.migrations import LATEST, newer_store
from graph.pg.rows import EPISODE_COLUMNS, memory_values

# one round trip: the row with its window (the previous shared memory of the session) and the
# id of the row after it, whose window must now start at this one
_INSERT_MEMORY = sql.SQL("""
WITH ins AS (
    INSERT INTO memories ({cols}, prev) VALUES ({values}, coalesce((
        SELECT CASE WHEN visibility = 'tenant' THEN content ELSE '' END FROM memories
        WHERE tenant = %s AND session = %s AND (ts_us, id) < (%s, %s) ORDER BY ts_us DESC, id DESC LIMIT 1), ''))
    RETURNING length(tsv_win) AS lex_len)
SELECT (SELECT lex_len FROM ins), (SELECT id FROM memories WHERE tenant = %s AND session = %s
                                   AND (ts_us, id) > (%s, %s) ORDER BY ts_us, id LIMIT 1)
""").format(cols=sql.SQL(", ").join(map(sql.Identifier, MEMORY_COLUMNS)),
            values=sql.SQL(", ").join(sql.Placeholder() * len(MEMORY_COLUMNS)))
_GRAPH = ("WITH n AS (INSERT INTO nodes (node_id, kind, tenant, attrs) VALUES (%s, %s, %s, %s), (%s, %s, %s, %s) "
          "ON CONFLICT DO NOTHING) INSERT INTO edges (src, dst, kind, tenant) VALUES (%s, %s, %s, %s), "
          "(%s, %s, %s, %s) ON CONFLICT DO NOTHING")
_NEIGHBOUR = {  # the row right before/after a key in its session (row-value order uses the index)
    False: "SELECT id, content, visibility FROM memories WHERE tenant = %s AND session = %s "
           "AND (ts_us, id) < (%s, %s) ORDER BY ts_us DESC, id DESC LIMIT 1",
    True: "SELECT id, content, visibility FROM memories WHERE tenant = %s AND session = %s "
          "AND (ts_us, id) > (%s, %s) ORDER BY ts_us, id LIMIT 1",
}
_REPOINT = ("UPDATE memories m SET prev = %s FROM (SELECT id, length(tsv_win) AS len FROM memories WHERE id = %s "
            "FOR UPDATE) o WHERE m.id = o.id RETURNING length(m.tsv_win) - o.len")


def _shared(row: tuple[Any, ...] | None) -> str:
    return str(row[1]) if row is not None and row[2] == "tenant" else ""


class PgTxn:
    """Writes of one transaction on one pooled connection; :meth:`finish` runs before COMMIT."""

    def __init__(self, conn: Connection[tuple[Any, ...]], owner: str, lease_s: float) -> None:
        self.conn = conn
        self.owner = owner
        self.lease_s = lease_s
        self._tenants: Counter[str] = Counter()  # touched tenants (a bump each, at commit)
        self._tenant: dict[str, Counter[str]] = {}  # tenant -> memories/non_turn/lex_len_sum deltas
        self._session: Counter[tuple[str, str, str]] = Counter()  # (tenant, session, memories|turns)
        self._private: Counter[tuple[str, str, str]] = Counter()  # (tenant, session, agent)
        self._scoped: Counter[tuple[str, str, str]] = Counter()  # (tenant, scope, key) of the counts table

    def _x(self, query: str | sql.Composable, args: Iterable[Any] = ()) -> Any:
        return self.conn.execute(query, list(args))  # type: ignore[arg-type]

    # ---- ids and journal ----------------------------------------------------------------------
    def allocate_ids(self, n: int) -> list[int]:
        """Ids from the one sequence shared by memories and episodes (never reused; gaps are fine)."""
        return [int(r[0]) for r in self._x("SELECT nextval('item_ids') FROM generate_series(1, %s)", [n])]

    def reserve_ids_through(self, item_id: int) -> None:
        self._x("SELECT pg_advisory_xact_lock(hashtext('memcore:item_ids'))")
        self._x("SELECT setval('item_ids', %s) WHERE (SELECT CASE WHEN is_called THEN last_value ELSE "
                "last_value - 1 END FROM item_ids) < %s", [item_id, item_id])

    def id_in_use(self, item_id: int) -> bool:
        row = self._x("SELECT EXISTS (SELECT 1 FROM memories WHERE id = %s) OR EXISTS (SELECT 1 FROM episodes "
                      "WHERE id = %s) OR EXISTS (SELECT 1 FROM entities WHERE id = %s) OR EXISTS (SELECT 1 FROM "
                      "journal WHERE item_id IN (%s, %s))",
                      [item_id, item_id, item_id, f"mem:{item_id}", f"ep:{item_id}"]).fetchone()
        return bool(row[0])

    def journal(self, entries: Iterable[tuple[str, str, str]]) -> None:
        """Intents owned by this replica, leased for ``lease_s`` (renewed by the store's heartbeat)."""
        rows = [(op, tenant, ref, self.owner, self.lease_s) for op, tenant, ref in entries]
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO journal (op, tenant, item_id, created_us, owner, lease_until) VALUES "
                    "(%s, %s, %s, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, %s, "
                    "clock_timestamp() + make_interval(secs => %s))", rows)

    def clear_journal(self, op: str, refs: Iterable[str]) -> int:
        # only this replica's: an entry another one claimed (this one's lease lapsed) is being recovered there
        # (rows read back, not rowcount: in pipeline mode a cursor has no count before its results arrive)
        return len(self._x("DELETE FROM journal WHERE op = %s AND item_id = ANY(%s) AND owner = %s RETURNING seq",
                           [op, list(refs), self.owner]).fetchall())

    def clear_journal_seqs(self, seqs: Iterable[int]) -> None:
        self._x("DELETE FROM journal WHERE seq = ANY(%s::bigint[])", [list(seqs)])

    def lock_memories(self, rows: Sequence[MemoryRecord]) -> None:
        """Take the advisory locks that writing ``rows`` needs, all at once and in one global order: per
        (tenant, session), its duplicate locks (by content hash), then its window lock — the order a
        single memory's own write takes them in. Two replicas writing batches over the same sessions
        then never wait on each other in a cycle (PostgreSQL broke such a deadlock by failing a batch)."""
        nodes = [r.node for r in rows]
        keys = sorted({(n.tenant, n.session, 0, n.content_hash) for n in nodes}
                      | {(n.tenant, n.session, 1, "") for n in nodes})
        for tenant, session, window, content_hash in keys:
            if window:
                self._lock_session(tenant, session)
            else:
                self._lock_duplicates(tenant, session, content_hash)

    def _lock_duplicates(self, tenant: str, session: str, content_hash: str) -> None:
        self._x("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"dup\x1f{tenant}\x1f{session}\x1f{content_hash}"])

    def duplicate_of(self, row: MemoryRecord, window_us: int, corrects: int | None = None) -> int | None:
        """The newest same-content memory of the session within the window that the writer can read.
        An advisory lock on (tenant, session, hash) makes concurrent replicas see each other's add."""
        n = row.node
        self._lock_duplicates(n.tenant, n.session, n.content_hash)
        found = self._x(
            "SELECT id FROM memories WHERE tenant = %s AND session = %s AND content_hash = %s "
            "AND ts_us BETWEEN %s AND %s AND (visibility <> 'agent' OR agent = %s) "
            "AND valid_to_us IS NULL AND id IS DISTINCT FROM %s "
            "ORDER BY ts_us DESC, id DESC LIMIT 1",
            [n.tenant, n.session, n.content_hash, n.ts_us - window_us, n.ts_us + window_us, n.agent,
             corrects]).fetchone()
        return None if found is None else int(found[0])

    # ---- memories -----------------------------------------------------------------------------
    def _lock_session(self, tenant: str, session: str) -> None:
        self._x("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", [f"win\x1f{tenant}\x1f{session}"])

    def _neighbour(self, tenant: str, session: str, key: tuple[int, int], after: bool) -> tuple[Any, ...] | None:
        row: tuple[Any, ...] | None = self._x(_NEIGHBOUR[after], [tenant, session, *key]).fetchone()
        return row

    def _repoint(self, tenant: str, mem_id: int, prev: str) -> None:
        delta = self._x(_REPOINT, [prev, mem_id]).fetchone()
        if delta is not None:
            self._count(tenant, lex_len_sum=int(delta[0]))

    def write_memory(self, row: MemoryRecord) -> None:
        """The memory row with its window, AGENT/SESSION nodes, both edges and its counters."""
        n = row.node
        tenant, session = n.tenant, n.session
        self._lock_session(tenant, session)
        where = [tenant, session, n.ts_us, n.id]
        lex_len, nxt = self._x(_INSERT_MEMORY, [*memory_values(row), *where, *where]).fetchone()
        if nxt is not None:  # an out-of-order insert: the next row's window now starts here
            self._repoint(tenant, int(nxt), row.content if n.visibility == "tenant" else "")
        a_node, s_node, m_node = agent_node(tenant, n.agent), session_node(tenant, session), mem_node(n.id)
        self._x(_GRAPH, [a_node, AGENT, tenant, json.dumps({"agent": n.agent}, ensure_ascii=False),
                         s_node, SESSION, tenant, json.dumps({"session": session}, ensure_ascii=False),
                         m_node, a_node, AUTHORED_BY, tenant, m_node, s_node, IN_SESSION, tenant])
        self._count(tenant, lex_len_sum=int(lex_len), changes=1)
        self._count_memory(tenant, count_keys(session, n.type, n.agent, n.channel, n.visibility, n.ts_us), 1)

    def erase_memory(self, tenant: str, mem_id: int) -> bool:
        """Delete the memory, its edges and its window (the next row is re-pointed); AGENT/SESSION
        nodes stay. A foreign or missing id changes nothing."""
        found = self._x("SELECT session FROM memories WHERE id = %s AND tenant = %s", [mem_id, tenant]).fetchone()
        if found is None:
            return False
        session = str(found[0])
        self._lock_session(tenant, session)
        gone = self._x("DELETE FROM memories WHERE id = %s AND tenant = %s RETURNING ts_us, type, visibility, "
                       "agent, length(tsv_win), channel", [mem_id, tenant]).fetchone()
        if gone is None:
            return False
        ts_us, type_, visibility, agent, lex_len, channel = gone
        key = (int(ts_us), mem_id)
        nxt = self._neighbour(tenant, session, key, after=True)
        if nxt is not None:  # the deleted text leaves the next row's window too
            self._repoint(tenant, int(nxt[0]), _shared(self._neighbour(tenant, session, key, after=False)))
        node = mem_node(mem_id)
        self._x("DELETE FROM edges WHERE src = %s OR dst = %s", [node, node])
        self.erase_entity_rows(mem_id)
        self._count(tenant, lex_len_sum=-int(lex_len), changes=1)
        self._count_memory(tenant, count_keys(session, type_, agent, channel, visibility, int(ts_us)), -1)
        return True

    def supersede_memory(self, tenant: str, mem_id: int, valid_to_us: int) -> bool:
        """End a current, unlocked memory's validity (the guard is in the UPDATE: two replicas
        correcting one version at once, one of them wins)."""
        done = self._x("UPDATE memories SET valid_to_us = %s WHERE id = %s AND tenant = %s AND valid_to_us IS NULL "
                       "AND NOT locked RETURNING id", [valid_to_us, mem_id, tenant]).fetchone()
        if done is not None:
            self._tenants[tenant] += 1
        return done is not None

    def end_memory(self, tenant: str, mem_id: int, valid_to_us: int | None, reason: str | None,
                   by: str | None) -> bool:
        """End (or revive) a memory, guarded in the UPDATE (see graph.api.GraphTxn.end_memory)."""
        guard = "valid_to_us IS NULL" if valid_to_us is not None else "end_reason IS NOT NULL"
        done = self._x(f"UPDATE memories SET valid_to_us = %s, end_reason = %s, ended_by = %s WHERE id = %s AND "
                       f"tenant = %s AND {guard} AND NOT locked RETURNING id",
                       [valid_to_us, reason, by, mem_id, tenant]).fetchone()
        if done is not None:
            self._tenants[tenant] += 1
        return done is not None

    def set_memory_state(self, tenant: str, mem_id: int, state: Mapping[str, Any]) -> bool:
        unknown = set(state) - set(MEMORY_STATE_FIELDS)
        if unknown:
            raise ValueError(f"not a memory state field: {sorted(unknown)}")
        if not state:
            return self._x("SELECT 1 FROM memories WHERE id = %s AND tenant = %s", [mem_id, tenant]).fetchone() \
                is not None
        sets = sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in state)
        values = [bool(v) if k == "locked" else v for k, v in state.items()]
        done = self._x(sql.SQL("UPDATE memories SET {} WHERE id = %s AND tenant = %s RETURNING id").format(sets),
                       [*values, mem_id, tenant]).fetchone()
        if done is not None:
            self._tenants[tenant] += 1
        return done is not None

    def rewrite_memory(self, tenant: str, mem_id: int, changes: Mapping[str, Any]) -> bool:
        """Replace text fields of a memory in place (its tsv_win is generated from the content); the
        next row's window is re-pointed when this one is shared, and the lexical length sum follows."""
        unknown = set(changes) - set(REWRITE_FIELDS)
        if unknown:
            raise ValueError(f"not a rewritable memory field: {sorted(unknown)}")
        found = self._x("SELECT session, ts_us, visibility, content FROM memories WHERE id = %s AND tenant = %s",
                        [mem_id, tenant]).fetchone()
        if found is None:
            return False
        if not changes:
            return True
        session, ts_us, visibility, old = found
        self._lock_session(tenant, str(session))
        sets = sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in changes)
        values = [json.dumps(dict(v), ensure_ascii=False) if k in ("metadata", "source") else v
                  for k, v in changes.items()]
        done = self._x(sql.SQL("UPDATE memories m SET {} FROM (SELECT id, length(tsv_win) AS len FROM memories "
                               "WHERE id = %s FOR UPDATE) o WHERE m.id = o.id AND m.tenant = %s "
                               "RETURNING length(m.tsv_win) - o.len").format(sets),
                       [*values, mem_id, tenant]).fetchone()
        if done is None:
            return False
        self._count(tenant, lex_len_sum=int(done[0]))
        new = changes.get("content", old)
        if new != old and visibility == "tenant":
            nxt = self._neighbour(tenant, str(session), (int(ts_us), mem_id), after=True)
            if nxt is not None:  # the next row's window holds this text
                self._repoint(tenant, int(nxt[0]), str(new))
        return True

    # ---- edges, episodes, meta -----------------------------------------------------------
    def write_edge(self, tenant: str, src: str, dst: str, kind: str) -> None:
        self._x("INSERT INTO edges (src, dst, kind, tenant) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                [src, dst, kind, tenant])
        self._tenants[tenant] += 1

    def erase_edges(self, edges: Iterable[tuple[str, str, str]]) -> None:
        for src, dst, kind in edges:
            gone = self._x("DELETE FROM edges WHERE src = %s AND dst = %s AND kind = %s RETURNING tenant",
                           [src, dst, kind]).fetchone()
            if gone is not None:
                self._tenants[str(gone[0])] += 1

    def write_episode(self, row: Mapping[str, Any]) -> None:
        """Insert or refresh the session's EPISODE row (one per session, as INSERT OR REPLACE did
        in SQLite) and its SUMMARIZES edge."""
        self._x("DELETE FROM episodes WHERE tenant = %s AND session = %s AND id <> %s",
                [row["tenant"], row["session"], row["id"]])
        cols = sql.SQL(", ").join(map(sql.Identifier, EPISODE_COLUMNS))
        updates = sql.SQL(", ").join(sql.SQL("{0} = excluded.{0}").format(sql.Identifier(c))
                                     for c in EPISODE_COLUMNS if c != "id")
        self._x(sql.SQL("INSERT INTO episodes ({}) VALUES ({}) ON CONFLICT (id) DO UPDATE SET {}").format(
            cols, sql.SQL(", ").join(sql.Placeholder() * len(EPISODE_COLUMNS)), updates),
            [row[c] for c in EPISODE_COLUMNS])
        self.write_edge(row["tenant"], f"ep:{row['id']}", session_node(row["tenant"], row["session"]), SUMMARIZES)

    def set_meta(self, key: str, value: str, *, overwrite: bool) -> None:
        conflict = "DO UPDATE SET value = excluded.value" if overwrite else "DO NOTHING"
        self._x(f"INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) {conflict}", [key, value])

    # ---- counters ----------------------------------------------------------------------------
    def touch(self, tenant: str) -> None:
        """Move the tenant's version at commit (a repair changed its rows underneath the caches)."""
        self._tenants[tenant] += 1

    def rebuild_counts(self) -> None:
        """Recount every tenant's rows (doctor: counts that disagree with them); see
        :func:`graph.pg.counts.rebuild`. Deltas this transaction already made are dropped: the
        recount sees its rows."""
        self._tenant.clear()
        self._session.clear()
        self._private.clear()
        self._scoped.clear()
        counts.rebuild(self.conn)

    def _count(self, tenant: str, **deltas: int) -> None:
        self._tenants[tenant] += 1
        self._tenant.setdefault(tenant, Counter()).update(deltas)

    def _count_memory(self, tenant: str, keys: list[tuple[str, str]], sign: int) -> None:
        """One memory written (+1) or erased (-1): each of its keys (graph.keys.count_keys) moves, in the
        table that keeps its scope (graph.pg.counts)."""
        for scope, key in keys:
            if scope in counts.TENANT_STATE:
                self._count(tenant, **{counts.TENANT_STATE[scope]: sign})
            elif scope in counts.SESSION_COUNTS:
                self._session[(tenant, key, counts.SESSION_COUNTS[scope])] += sign
            elif scope == counts.PRIVATE_COUNTS:
                session, agent = key.split(SEP, 1)
                self._private[(tenant, session, agent)] += sign
            else:
                self._scoped[(tenant, scope, key)] += sign

    def finish(self) -> None:
        """Apply the counter deltas and bump each touched tenant's version (sorted: no lock-order
        deadlock between two transactions touching the same tenants). Refused, and so rolled back,
        when another replica has meanwhile upgraded the store past this code's schema: these writes
        would miss what the newer schema keeps (a replica of the version before step 9 went on
        writing mentions without their counts). A migration step locks the tables it fills, so a
        transaction that passed this check has committed before the step counts its rows."""
        found = self._x("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if found is not None and int(str(found[0])) > LATEST:
            raise newer_store(int(str(found[0])))
        for tenant in sorted(self._tenants):
            d = self._tenant.get(tenant, Counter())
            self._x("INSERT INTO tenant_state AS t (tenant, version, memories, non_turn, lex_len_sum, changes) "
                    "VALUES (%s, 1, %s, %s, %s, %s) ON CONFLICT (tenant) DO UPDATE SET version = t.version + 1, "
                    "memories = t.memories + excluded.memories, non_turn = t.non_turn + excluded.non_turn, "
                    "lex_len_sum = t.lex_len_sum + excluded.lex_len_sum, changes = t.changes + excluded.changes",
                    [tenant, d["memories"], d["non_turn"], d["lex_len_sum"], d["changes"]])
        sessions: dict[tuple[str, str], Counter[str]] = {}
        for (tenant, session, what), n in self._session.items():
            sessions.setdefault((tenant, session), Counter())[what] += n
        for (tenant, session), d in sorted(sessions.items()):
            self._x("INSERT INTO session_counts AS s (tenant, session, memories, turns) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (tenant, session) DO UPDATE SET memories = s.memories + excluded.memories, "
                    "turns = s.turns + excluded.turns", [tenant, session, d["memories"], d["turns"]])
        emptied = [k for k, d in sessions.items() if d["memories"] < 0]
        if emptied:
            self._x("DELETE FROM session_counts WHERE memories <= 0 AND (tenant, session) IN "
                    "(SELECT * FROM unnest(%s::text[], %s::text[]))",
                    [[t for t, _s in emptied], [s for _t, s in emptied]])
        for (tenant, session, agent), n in sorted(self._private.items()):
            if n:
                self._x("INSERT INTO private_counts AS p (tenant, session, agent, rows) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (tenant, session, agent) DO UPDATE SET rows = p.rows + excluded.rows",
                        [tenant, session, agent, n])
            if n < 0:
                self._x("DELETE FROM private_counts WHERE tenant = %s AND session = %s AND agent = %s AND rows <= 0",
                        [tenant, session, agent])
        self._finish_scoped()

    def _finish_scoped(self) -> None:
        """The scoped counts in one statement (sorted keys: a fixed lock order), emptied ones deleted."""
        moved = sorted((k, n) for k, n in self._scoped.items() if n)
        if not moved:
            return
        cols = [[k[i] for k, _n in moved] for i in range(3)]
        self._x("INSERT INTO counts AS c (tenant, scope, key, n) SELECT * FROM unnest(%s::text[], %s::text[], "
                "%s::text[], %s::bigint[]) ON CONFLICT (tenant, scope, key) DO UPDATE SET n = c.n + excluded.n",
                [*cols, [n for _k, n in moved]])
        fallen = [k for k, n in moved if n < 0]
        if fallen:
            self._x("DELETE FROM counts WHERE n <= 0 AND (tenant, scope, key) IN "
                    "(SELECT * FROM unnest(%s::text[], %s::text[], %s::text[]))",
                    [[k[i] for k in fallen] for i in range(3)])

    # ---- entity rows (graph.entity_link's EntityRows) ----------------------------------------------
    def _counted(self, rows: Iterable[tuple[Any, ...]], sign: int) -> int:
        """Moves the mention counts of the rows a statement inserted (+1) or deleted (-1); how many."""
        n = 0
        for tenant, entity_id, shared, agent in rows:
            self._scoped[(str(tenant), "mention", mention_key(int(entity_id), bool(shared), str(agent)))] += sign
            n += 1
        return n

    # ---- graph.entity_link.EntityRows ----------------------------------------------------------
    def lookup_keys(self, tenant: str, keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
        return held_keys(self._x(KEYS_SQL, [tenant, list(keys)]).fetchall())

    def rekey_private(self, tenant: str, norm: str) -> None:
        row = self._x("SELECT entity_id, alias, pos FROM entity_aliases WHERE tenant = %s AND norm = %s FOR UPDATE",
                      [tenant, norm]).fetchone()
        if row is None:
            return
        viewers = [str(v) for (v,) in self._x("SELECT viewer FROM alias_seen WHERE tenant = %s AND norm = %s",
                                              [tenant, norm]).fetchall() if v]
        for viewer in viewers or [""]:  # '' : a key no viewer resolves (the name was restored without readers)
            key = private_key(viewer, norm)
            self._x("INSERT INTO entity_aliases (tenant, norm, entity_id, alias, pos) VALUES (%s, %s, %s, %s, %s) "
                    "ON CONFLICT DO NOTHING", [tenant, key, row[0], row[1], row[2]])
            if viewer:
                self._x("INSERT INTO alias_seen (tenant, norm, viewer) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
                        [tenant, key, viewer])
        self._x("DELETE FROM entity_aliases WHERE tenant = %s AND norm = %s", [tenant, norm])
        self._x("DELETE FROM alias_seen WHERE tenant = %s AND norm = %s", [tenant, norm])

    def create_entity(self, tenant: str, name: str, kind: str | None, now_us: int) -> int:
        entity_id = self.allocate_ids(1)[0]
        self._x("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (%s, %s, %s, %s, %s)",
                [entity_id, tenant, name, kind, now_us])
        return entity_id

    def add_alias(self, tenant: str, entity_id: int, norm: str, alias: str) -> int:
        found = self._x("INSERT INTO entity_aliases (tenant, norm, entity_id, alias, pos) VALUES (%s, %s, %s, %s, "
                        "(SELECT coalesce(max(pos), -1) + 1 FROM entity_aliases WHERE entity_id = %s)) "
                        "ON CONFLICT DO NOTHING RETURNING entity_id",
                        [tenant, norm, entity_id, alias, entity_id]).fetchone()
        if found is None:
            found = self._x("SELECT entity_id FROM entity_aliases WHERE tenant = %s AND norm = %s",
                            [tenant, norm]).fetchone()
        return int(found[0])

    def drop_entity(self, tenant: str, entity_id: int) -> None:
        self._x("DELETE FROM entities WHERE id = %s AND tenant = %s", [entity_id, tenant])

    def fill_kind(self, tenant: str, entity_id: int, kind: str) -> None:
        self._x("UPDATE entities SET kind = %s WHERE id = %s AND tenant = %s AND kind IS NULL",
                [kind, entity_id, tenant])

    def see_aliases(self, tenant: str, viewer: str, norms: Sequence[str]) -> None:
        self._x("INSERT INTO alias_seen (tenant, norm, viewer) SELECT %s, n, %s FROM unnest(%s::text[]) n "
                "ON CONFLICT DO NOTHING", [tenant, viewer, list(norms)])

    def write_mentions(self, tenant: str, writer: Writer, entity_ids: Sequence[int]) -> None:
        self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT %s, e, %s, %s, %s, %s "
            f"FROM unnest(%s::bigint[]) e ON CONFLICT DO NOTHING{COUNTED}",
            [writer.mem_id, tenant, writer.ts_us, writer.shared, writer.agent, list(entity_ids)]).fetchall(), 1)

    def write_relations(self, tenant: str, writer: Writer, rows: Sequence[tuple[int, int, str]]) -> None:
        if rows:
            self._x("INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) SELECT s, d, lb, %s, %s, "
                    "%s, %s FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) r(s, d, lb) ON CONFLICT DO NOTHING",
                    [writer.mem_id, tenant, writer.shared, writer.agent, [r[0] for r in rows], [r[1] for r in rows],
                     [r[2] for r in rows]])

    # ---- graph.api.GraphTxn ------------------------------------------------------------------
    def _writer(self, tenant: str, mem_id: int) -> Writer | None:
        found = self._x("SELECT ts_us, visibility, agent FROM memories WHERE id = %s AND tenant = %s",
                        [mem_id, tenant]).fetchone()
        return None if found is None else Writer(mem_id, int(found[0]), found[1] == "tenant", str(found[2]))

    def link_entities(self, tenant: str, mem_id: int, entities: Sequence[EntitySpec],
                      relations: Sequence[RelationSpec], now_us: int) -> list[int]:
        writer = self._writer(tenant, mem_id)
        if writer is None or not (entities or relations):
            return []
        self.touch(tenant)
        return link(self, tenant, writer, entities, relations, now_us)

    def _owned(self, tenant: str, ids: Sequence[int]) -> bool:
        row = self._x("SELECT count(*) FROM entities WHERE tenant = %s AND id = ANY(%s::bigint[])",
                      [tenant, list(ids)]).fetchone()
        return int(row[0]) == len(set(ids))

    def merge_entities(self, tenant: str, keep: int, merge: int) -> bool:
        if keep == merge:
            return False
        # both rows locked in id order: two merges of the same pair cannot interleave
        locked = self._x("SELECT id FROM entities WHERE tenant = %s AND id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE",
                         [tenant, [keep, merge]]).fetchall()
        if len(locked) != 2:
            return False
        self._x("UPDATE entity_aliases SET entity_id = %s, pos = pos + 1 + (SELECT coalesce(max(pos), -1) FROM "
                "entity_aliases WHERE entity_id = %s) WHERE entity_id = %s", [keep, keep, merge])
        self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT mem_id, %s, tenant, "
            f"ts_us, shared, agent FROM mentions WHERE entity_id = %s ON CONFLICT DO NOTHING{COUNTED}",
            [keep, merge]).fetchall(), 1)
        self._counted(self._x(f"DELETE FROM mentions WHERE entity_id = %s{COUNTED}", [merge]).fetchall(), -1)
        self._x("INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) SELECT CASE src WHEN %s THEN "
                "%s ELSE src END, CASE dst WHEN %s THEN %s ELSE dst END, label, mem_id, tenant, shared, agent FROM "
                "relations WHERE (src = %s OR dst = %s) AND tenant = %s ON CONFLICT DO NOTHING",
                [merge, keep, merge, keep, merge, merge, tenant])
        self._x("DELETE FROM relations WHERE (src = %s OR dst = %s OR (src = %s AND dst = %s)) AND tenant = %s",
                [merge, merge, keep, keep, tenant])
        self._x("UPDATE entities SET kind = (SELECT kind FROM entities WHERE id = %s) WHERE id = %s AND kind IS NULL",
                [merge, keep])
        self._x("DELETE FROM entities WHERE id = %s", [merge])
        self.touch(tenant)
        return True

    def restore_entity(self, tenant: str, record: EntityRecord) -> bool:
        created = self._x("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (%s, %s, %s, %s, %s) "
                          "ON CONFLICT DO NOTHING RETURNING id",
                          [record.id, tenant, record.name, record.kind, record.created_us]).fetchone()
        if created is None:
            owner = self._x("SELECT tenant FROM entities WHERE id = %s", [record.id]).fetchone()
            if owner is None or owner[0] != tenant:
                return False
            if record.kind:
                self.fill_kind(tenant, record.id, record.kind)
        for alias in (record.name, *record.aliases):
            self.add_alias(tenant, record.id, entity_norm(alias), alias)
        self.touch(tenant)
        return created is not None

    def restore_mentions(self, tenant: str, mem_id: int, entity_ids: Sequence[int]) -> int:
        writer = self._writer(tenant, mem_id)
        wanted = id_list(entity_ids)
        if writer is None or not wanted:
            return 0
        written = self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT %s, id, tenant, "
            f"%s, %s, %s FROM entities WHERE id = ANY(%s::bigint[]) AND tenant = %s ON CONFLICT DO NOTHING{COUNTED}",
            [mem_id, writer.ts_us, writer.shared, writer.agent, wanted, tenant]).fetchall(), 1)
        if written:
            self.touch(tenant)
        return written

    def restore_alias_views(self, tenant: str, mem_id: int, names: Sequence[str]) -> None:
        writer = self._writer(tenant, mem_id)
        if writer is not None and names:
            self.see_aliases(tenant, seen_by(writer), list(dict.fromkeys(entity_norm(n) for n in names)))

    def restore_relations(self, tenant: str, relations: Sequence[EntityRelation]) -> int:
        written = 0
        for rel in relations:
            writer = self._writer(tenant, rel.mem_id)
            if writer is None or rel.src == rel.dst or not self._owned(tenant, [rel.src, rel.dst]):
                continue
            written += len(self._x(
                "INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) VALUES (%s, %s, %s, %s, %s, "
                "%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                [rel.src, rel.dst, rel.label, rel.mem_id, tenant, writer.shared, writer.agent]).fetchall())
        if written:
            self.touch(tenant)
        return written

    def erase_entity_links(self, tenant: str, mentions: Sequence[tuple[int, int]],
                           relations: Sequence[EntityRelation]) -> int:
        gone = 0
        for mem_id, entity_id in mentions:
            gone += self._counted(self._x(f"DELETE FROM mentions WHERE mem_id = %s AND entity_id = %s AND tenant = %s"
                                          f"{COUNTED}", [mem_id, entity_id, tenant]).fetchall(), -1)
        for r in relations:
            gone += len(self._x("DELETE FROM relations WHERE src = %s AND dst = %s AND label = %s AND mem_id = %s "
                                "AND tenant = %s RETURNING 1", [r.src, r.dst, r.label, r.mem_id, tenant]).fetchall())
        self.touch(tenant)
        return gone

    def erase_entity(self, tenant: str, entity_id: int) -> bool:
        found = self._x("SELECT id FROM entities WHERE id = %s AND tenant = %s FOR UPDATE",
                        [entity_id, tenant]).fetchone()
        if found is None:
            return False
        self._x("DELETE FROM alias_seen WHERE tenant = %s AND norm IN (SELECT norm FROM entity_aliases "
                "WHERE entity_id = %s AND tenant = %s)", [tenant, entity_id, tenant])
        self._x("DELETE FROM entity_aliases WHERE entity_id = %s AND tenant = %s", [entity_id, tenant])
        self._counted(self._x(f"DELETE FROM mentions WHERE entity_id = %s AND tenant = %s{COUNTED}",
                              [entity_id, tenant]).fetchall(), -1)
        self._x("DELETE FROM relations WHERE (src = %s OR dst = %s) AND tenant = %s", [entity_id, entity_id, tenant])
        self._x("DELETE FROM entities WHERE id = %s AND tenant = %s", [entity_id, tenant])
        self.touch(tenant)
        return True

    def erase_entity_rows(self, mem_id: int) -> None:
        """A deleted memory's MENTIONS and the RELATED edges it declared (its entities stay)."""
        self._counted(self._x(f"DELETE FROM mentions WHERE mem_id = %s{COUNTED}", [mem_id]).fetchall(), -1)
        self._x("DELETE FROM relations WHERE mem_id = %s", [mem_id])
