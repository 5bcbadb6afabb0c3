"""The read half of :class:`graph.pg.store.PostgresGraphStore`: every query takes the tenant, so a
foreign id reads exactly like a missing one. Counts come from the counter tables (O(1) or
O(values), see :mod:`graph.pg.counts`); order reads are index seeks on (tenant, session, ts_us, id).
Semantics follow :mod:`graph.sqlite.store` method by method."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from psycopg import sql

from graph.agent_names import AgentNameIndex
from graph.api import (
    AGENT,
    SUPERSEDES,
    EdgeRef,
    EpisodeNode,
    Key,
    MemoryNode,
    SessionStats,
)
from graph.pg.counts import SEP
from graph.pg.entities import PgEntityReads
from graph.pg.rows import EPISODE_SELECT, NODE_SELECT, check_field, episode_node, like_prefix, memory_node

T = TypeVar("T")
PAGE = 256  # iter_newest's page size
_ORDER_INDEX = {  # (session given, turns only) -> the WHERE prefix
    (True, False): "tenant = %s AND session = %s", (True, True): "tenant = %s AND session = %s AND type = 'turn'",
    (False, False): "tenant = %s", (False, True): "tenant = %s AND type = 'turn'",
}


class Reads(PgEntityReads):
    _read: Callable[..., Any]

    def __init__(self) -> None:
        self._agent_cache: dict[str, tuple[int, AgentNameIndex]] = {}

    def _q(self, query: str | sql.Composable, args: list[Any], what: str = "read") -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._read(lambda c: c.execute(query, args).fetchall(), what)
        return rows

    # ---- nodes ------------------------------------------------------------------------------
    def memory(self, tenant: str, mem_id: int) -> MemoryNode | None:
        rows = self._q(f"SELECT {NODE_SELECT} FROM memories m WHERE m.id = %s AND m.tenant = %s", [mem_id, tenant])
        return memory_node(rows[0]) if rows else None

    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]:
        rows = self._q(f"SELECT {NODE_SELECT} FROM memories m WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s",
                       [list(ids), tenant])
        return {n.id: n for n in map(memory_node, rows)}

    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]:
        rows = self._q("SELECT id, content FROM memories WHERE id = ANY(%s::bigint[]) AND tenant = %s",
                       [list(ids), tenant])
        return {int(i): str(c) for i, c in rows}

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None:
        rows = self._q(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = %s AND tenant = %s", [ep_id, tenant])
        return episode_node(rows[0]) if rows else None

    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None:
        rows = self._q(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s AND session = %s",
                       [tenant, session])
        return episode_node(rows[0]) if rows else None

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_node(r) for r in self._q(
            f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s ORDER BY id", [tenant])]

    def by_idempotency_key(self, tenant: str, key: str) -> MemoryNode | None:
        rows = self._q(f"SELECT {NODE_SELECT} FROM memories m WHERE m.tenant = %s AND m.idempotency_key = %s",
                       [tenant, key])
        return memory_node(rows[0]) if rows else None

    def memory_ids(self, tenant: str) -> list[int]:
        return [k[1] for k in self.iter_newest(tenant, None)]

    # ---- order --------------------------------------------------------------------------------
    def page(self, tenant: str, session: str | None, before: Key | None, limit: int, *,
             turns_only: bool = False) -> list[Key]:
        where = _ORDER_INDEX[(session is not None, turns_only)]
        args: list[Any] = [tenant] if session is None else [tenant, session]
        if before is not None:
            where += " AND (ts_us, id) < (%s, %s)"
            args += list(before)
        rows = self._q(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us DESC, id DESC LIMIT %s",
                       [*args, max(0, limit)])
        return [(int(t), int(i)) for t, i in rows]

    def iter_newest(self, tenant: str, session: str | None, before: Key | None = None, *,
                    turns_only: bool = False) -> Iterator[Key]:
        while True:
            keys = self.page(tenant, session, before, PAGE, turns_only=turns_only)
            yield from keys
            if len(keys) < PAGE:
                return
            before = keys[-1]

    def adjacent(self, tenant: str, session: str, key: Key, *, forward: bool, turns_only: bool = False) -> Key | None:
        where = _ORDER_INDEX[(True, turns_only)]
        op, order = (">", "") if forward else ("<", " DESC")
        rows = self._q(f"SELECT ts_us, id FROM memories WHERE {where} AND (ts_us, id) {op} (%s, %s) "
                       f"ORDER BY ts_us{order}, id{order} LIMIT 1", [tenant, session, *key])
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        ids = [n.id for n in nodes if n.tenant == tenant]
        rows = self._q(
            "SELECT m.id, p.ts_us, p.id, n.ts_us, n.id FROM memories m "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
            "AND (x.ts_us, x.id) < (m.ts_us, m.id) ORDER BY x.ts_us DESC, x.id DESC LIMIT 1) p ON true "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
            "AND (x.ts_us, x.id) > (m.ts_us, m.id) ORDER BY x.ts_us, x.id LIMIT 1) n ON true "
            "WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s", [ids, tenant])
        return {int(r[0]): (None if r[1] is None else (int(r[1]), int(r[2])),
                            None if r[3] is None else (int(r[3]), int(r[4]))) for r in rows}

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        first, last = self.page_edge(tenant, session, oldest=True), self.page_edge(tenant, session, oldest=False)
        return None if first is None or last is None else (first, last)

    def page_edge(self, tenant: str, session: str | None, *, oldest: bool) -> Key | None:
        where = _ORDER_INDEX[(session is not None, False)]
        order = "" if oldest else " DESC"
        args = [tenant] if session is None else [tenant, session]
        rows = self._q(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us{order}, id{order} LIMIT 1", args)
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int:
        if session is None:
            rows = self._q("SELECT memories, memories - non_turn FROM tenant_state WHERE tenant = %s", [tenant])
        else:
            rows = self._q("SELECT memories, turns FROM session_counts WHERE tenant = %s AND session = %s",
                           [tenant, session])
        return int(rows[0][1 if turns_only else 0]) if rows else 0

    def _scoped(self, tenant: str, scope: str, key: str) -> int:
        rows = self._q("SELECT n FROM counts WHERE tenant = %s AND scope = %s AND key = %s", [tenant, scope, key])
        return int(rows[0][0]) if rows else 0

    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        rows = self._q("SELECT key, n FROM counts WHERE tenant = %s AND scope = 'day' AND key >= %s AND key < %s",
                       [tenant, f"{first_day:08d}", f"{first_day + days:08d}"])
        found = {int(k): int(n) for k, n in rows}
        return [found.get(first_day + i, 0) for i in range(days)]

    def count_before(self, tenant: str, key: Key) -> int:
        rows = self._q("SELECT count(*) FROM memories WHERE tenant = %s AND (ts_us, id) < (%s, %s)", [tenant, *key])
        return int(rows[0][0])

    def sessions(self, tenant: str) -> list[SessionStats]:
        rows = self._q(
            "SELECT s.session, s.memories, s.turns, f.ts_us, f.id, l.ts_us, l.id FROM session_counts s "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us, id LIMIT 1) f ON true "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us DESC, id DESC LIMIT 1) l ON true "
            "WHERE s.tenant = %s AND s.memories > 0 ORDER BY s.session", [tenant])
        return [SessionStats(str(r[0]), int(r[1]), int(r[2]), None if r[3] is None else (int(r[3]), int(r[4])),
                             None if r[5] is None else (int(r[5]), int(r[6]))) for r in rows]

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        rows = self._q("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s AND session = %s "
                       "AND agent IS DISTINCT FROM %s", [tenant, session, viewer])
        return int(rows[0][0])

    def non_turn_count(self, tenant: str) -> int:
        rows = self._q("SELECT non_turn FROM tenant_state WHERE tenant = %s", [tenant])
        return int(rows[0][0]) if rows else 0

    def version(self, tenant: str) -> int:
        """The tenant's change counter: bumped by every write transaction that touched the tenant
        (replicas compare it to refresh what they cached)."""
        rows = self._q("SELECT version FROM tenant_state WHERE tenant = %s", [tenant])
        return int(rows[0][0]) if rows else 0

    # ---- fields -------------------------------------------------------------------------------
    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        q = sql.SQL("SELECT id FROM memories WHERE tenant = %s AND {} = %s ORDER BY ts_us DESC, id DESC LIMIT %s")
        return [int(r[0]) for r in self._q(q.format(check_field(field)), [tenant, value, limit])]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        check_field(field)
        return self._scoped(tenant, field, value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        check_field(field)
        rows = self._q('SELECT key, n FROM counts WHERE tenant = %s AND scope = %s AND n > 0 ORDER BY key COLLATE "C"',
                       [tenant, field])
        return {str(k): int(n) for k, n in rows}

    def private_count(self, tenant: str) -> int:
        rows = self._q("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s", [tenant])
        return int(rows[0][0])

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        """(source_id, id) order, code point by code point as SQLite compares (COLLATE "C")."""
        rows = self._q('SELECT id FROM memories WHERE tenant = %s AND source_id LIKE %s '
                       'ORDER BY source_id COLLATE "C", id LIMIT %s', [tenant, like_prefix(prefix), limit])
        return [int(r[0]) for r in rows]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        rows = self._q("SELECT count(*) FROM memories WHERE tenant = %s AND source_id LIKE %s",
                       [tenant, like_prefix(prefix)])
        return int(rows[0][0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self._q("SELECT key FROM counts WHERE tenant = %s AND scope = 'schan' AND starts_with(key, %s) "
                       "AND n > 0", [tenant, channel + SEP])
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self._scoped(tenant, "schan", f"{channel}{SEP}{session}") > 0

    # ---- edges --------------------------------------------------------------------------------
    def edges_of(self, tenant: str, node: str) -> list[EdgeRef]:
        """The node's edges whose both ends are the tenant's (as SQLite: an edge to a foreign or
        missing node is left out; a foreign node has no edges)."""
        rows = self._q(f"SELECT e.dir, e.kind, e.other FROM (SELECT %s::text AS n, %s::text AS t) me, LATERAL "
                       f"(SELECT 'out' AS dir, kind, dst AS other FROM edges WHERE src = me.n AND tenant = me.t "
                       f"UNION ALL SELECT 'in', kind, src FROM edges WHERE dst = me.n AND tenant = me.t) e "
                       f"WHERE {owner_sql('me.n')} = me.t AND {owner_sql('e.other')} = me.t", [node, tenant])
        return [EdgeRef(r[0], str(r[1]), str(r[2])) for r in rows]

    def superseders(self, tenant: str, ids: Iterable[int]) -> dict[int, list[int]]:
        wanted = [f"mem:{i}" for i in ids]
        out: dict[int, list[int]] = {}
        for src, dst in self._q("SELECT src, dst FROM edges WHERE dst = ANY(%s) AND kind = %s AND tenant = %s "
                                "ORDER BY src", [wanted, SUPERSEDES, tenant]):
            if str(src).startswith("mem:"):
                out.setdefault(int(str(dst)[4:]), []).append(int(str(src)[4:]))
        return out

    # ---- tenants and agents -------------------------------------------------------------------
    def tenants(self) -> list[str]:
        return [str(r[0]) for r in self._q("SELECT tenant FROM tenant_state WHERE memories > 0 ORDER BY tenant", [])]

    def agents(self, tenant: str) -> frozenset[str]:
        rows = self._q("SELECT attrs FROM nodes WHERE tenant = %s AND kind = %s", [tenant, AGENT])
        return frozenset(str(json.loads(r[0])["agent"]) for r in rows)

    def agent_names(self, tenant: str) -> AgentNameIndex:
        """The tenant's agent-name index, rebuilt when the tenant's version moved."""
        version = self.version(tenant)
        cached = self._agent_cache.get(tenant)
        if cached is not None and cached[0] == version:
            return cached[1]
        index = AgentNameIndex()
        for name in sorted(self.agents(tenant)):
            index.add(name)
        self._agent_cache[tenant] = (version, index)
        return index



def owner_sql(node: str) -> str:
    """A SQL expression: the tenant owning the node whose id is the column ``node`` (a memory,
    an episode or a row of ``nodes``), NULL when it does not exist."""
    return (f"(CASE WHEN {node} ~ '^mem:[0-9]{{1,18}}$' THEN (SELECT tenant FROM memories WHERE id = "
            f"substr({node}, 5)::bigint) WHEN {node} ~ '^ep:[0-9]{{1,18}}$' THEN (SELECT tenant FROM episodes "
            f"WHERE id = substr({node}, 4)::bigint) WHEN {node} ~ '^ent:[0-9]{{1,18}}$' THEN (SELECT tenant FROM "
            f"entities "
            f"WHERE id = substr({node}, 5)::bigint) ELSE (SELECT tenant FROM nodes WHERE node_id = {node}) END)")
