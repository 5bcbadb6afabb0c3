"""The PostgreSQL store's :class:`graph.api.Timeline`: memories in (timestamp, id) order, index seeks on
(tenant, session, ts_us, id); session neighbours and bounds through the replica's versioned cache."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator
from typing import Any

from psycopg import Connection

from graph.api import Key, MemoryNode, Timeline
from graph.pg.queries import PgQueries
from graph.pg.versioned_cache import ABSENT, VersionedCache

PAGE = 256  # iter_newest's page size
ORDER_INDEX = {  # (session given, turns only) -> the WHERE prefix
    (True, False): "tenant = %s AND session = %s", (True, True): "tenant = %s AND session = %s AND type = 'turn'",
    (False, False): "tenant = %s", (False, True): "tenant = %s AND type = 'turn'",
}
# each memory's neighbours in its session by (ts_us, id): (id, previous ts/id, next ts/id)
ADJACENT_SQL = (
    "SELECT m.id, p.ts_us, p.id, n.ts_us, n.id FROM memories m "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) < (m.ts_us, m.id) ORDER BY x.ts_us DESC, x.id DESC LIMIT 1) p ON true "
    "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories x WHERE x.tenant = m.tenant AND x.session = m.session "
    "AND (x.ts_us, x.id) > (m.ts_us, m.id) ORDER BY x.ts_us, x.id LIMIT 1) n ON true "
    "WHERE m.id = ANY(%s::bigint[]) AND m.tenant = %s")


def _adjacent(row: tuple[Any, ...]) -> tuple[Key | None, Key | None]:
    return (None if row[1] is None else (int(row[1]), int(row[2])),
            None if row[3] is None else (int(row[3]), int(row[4])))


class PgTimeline(Timeline):
    """Pages, neighbours and bounds of a session or a tenant; neighbours and bounds versioned-cached."""

    def __init__(self, q: PgQueries, cache: VersionedCache) -> None:
        self.q = q
        self.cache = cache

    def page(self, tenant: str, session: str | None, before: Key | None, limit: int, *,
             turns_only: bool = False) -> list[Key]:
        where = ORDER_INDEX[(session is not None, turns_only)]
        args: list[Any] = [tenant] if session is None else [tenant, session]
        if before is not None:
            where += " AND (ts_us, id) < (%s, %s)"
            args += list(before)
        rows = self.q.rows(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us DESC, id DESC LIMIT %s",
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
        where = ORDER_INDEX[(True, turns_only)]
        op, order = (">", "") if forward else ("<", " DESC")
        rows = self.q.rows(f"SELECT ts_us, id FROM memories WHERE {where} AND (ts_us, id) {op} (%s, %s) "
                           f"ORDER BY ts_us{order}, id{order} LIMIT 1", [tenant, session, *key])
        return (int(rows[0][0]), int(rows[0][1])) if rows else None

    def adjacent_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> dict[int, tuple[Key | None, Key | None]]:
        return self.cache.by_id(tenant, "adjacent", [n.id for n in nodes if n.tenant == tenant], ADJACENT_SQL,
                                _adjacent)

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            where, args = ("tenant = %s", [tenant]) if session is None else (
                "tenant = %s AND session = %s", [tenant, session])
            cursors = [conn.execute(f"SELECT ts_us, id FROM memories WHERE {where} ORDER BY ts_us{o}, id{o} LIMIT 1",
                                    args) for o in ("", " DESC")]
            ends = [cur.fetchone() for cur in cursors]
            if ends[0] is None or ends[1] is None:
                return {session: None}
            return {session: ((int(ends[0][0]), int(ends[0][1])), (int(ends[1][0]), int(ends[1][1])))}

        value = self.cache.values(tenant, "bounds", [session], fetch)[session]
        return None if value is ABSENT else value
