"""The SQLite store's :class:`graph.api.Timeline`: memories in (timestamp, id) order, read off the
ordered indexes (the SQL of each walk is in :mod:`graph.sqlite.walks`).

Recall's session neighbours (:meth:`SqliteTimeline.adjacent_many`) are kept between requests in an
:class:`AdjacencyCache` while their session is not written; the store tells the timeline what each
commit wrote (:meth:`SqliteTimeline.committed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from graph.api import Key, MemoryNode, Timeline
from graph.sqlite.adjacency_cache import AdjacencyCache
from graph.sqlite.queries import SqliteQueries
from graph.sqlite.walks import adjacent_sql, order_index, packed_key

if TYPE_CHECKING:
    from graph.sqlite.txn import Effects

_ADJACENT_CHUNK = 300  # three parameters a row: under SQLite's oldest bound of 999 variables
_PAGE_STEP = 64


class SqliteTimeline(Timeline):
    """Pages, neighbours and bounds of a session or a tenant; neighbours cached while unwritten."""

    def __init__(self, q: SqliteQueries, cache_nodes: int) -> None:
        self.q = q
        self.adjacency = AdjacencyCache(cache_nodes)

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
            rows = self.q.all(f"{sql} ORDER BY ts_us DESC, id DESC LIMIT ?", [*args, limit])
        else:  # two index ranges: the rest of the timestamp, then everything older
            rows = self.q.all(f"{sql} AND ts_us = ? AND id < ? ORDER BY id DESC LIMIT ?", [*args, *before, limit])
            if len(rows) < limit:
                rows += self.q.all(f"{sql} AND ts_us < ? ORDER BY ts_us DESC, id DESC LIMIT ?",
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
        with self.q.connection() as conn:
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
        out, missing = self.adjacency.get_many(tenant, nodes)
        tick = self.adjacency.tick()
        read: dict[int, tuple[Key | None, Key | None]] = {}
        for start in range(0, len(missing), _ADJACENT_CHUNK):
            chunk = missing[start:start + _ADJACENT_CHUNK]
            args: list[Any] = [x for n in chunk for x in (n.id, n.session, n.ts_us)]
            for mem_id, before, after in self.q.all(adjacent_sql(len(chunk)), [*args, tenant], tuples=True):
                read[int(mem_id)] = (packed_key(before), packed_key(after))
        self.adjacency.put_many(tick, missing, read)
        out.update(read)
        return out

    def bounds(self, tenant: str, session: str | None) -> tuple[Key, Key] | None:
        where, args = ("tenant = ? AND session = ?", (tenant, session)) if session is not None else (
            "tenant = ?", (tenant,))
        table = f"memories INDEXED BY {order_index(session, False)}"
        with self.q.connection() as conn:
            first = conn.execute(f"SELECT ts_us, id FROM {table} WHERE {where} ORDER BY ts_us, id LIMIT 1",
                                 args).fetchone()
            if first is None:
                return None
            last = conn.execute(f"SELECT ts_us, id FROM {table} WHERE {where} ORDER BY ts_us DESC, id DESC LIMIT 1",
                                args).fetchone()
        return (int(first[0]), int(first[1])), (int(last[0]), int(last[1]))

    def committed(self, fx: Effects) -> None:
        """A commit wrote or erased memories: their sessions' kept neighbours are stale."""
        self.adjacency.written({(n.tenant, n.session) for n in fx.written} | fx.sessions)

    def forget(self) -> None:
        self.adjacency.clear()
