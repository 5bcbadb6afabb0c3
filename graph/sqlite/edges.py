"""The SQLite graph store's walks in (timestamp, id) order and its edge reads.

Kept apart from :mod:`graph.sqlite.store` (which mixes :class:`SqliteEdges` in): the index each
ordered walk names, the one-statement neighbour join recall uses, and edges by node.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from graph.api import SUPERSEDES, EdgeRef

_CHUNK = 500
# the partial index edges_supersedes serves only a query that names its kind as this literal
_CHAINED = f"tenant = ? AND kind = '{SUPERSEDES}'"


def _neighbour(side: str, tenant: str) -> str:
    """A correlated seek: walk the session index from the memory's timestamp in one direction
    and stop at the first row past it (a row-value range here made SQLite scan the session).
    Its key comes back as one ``"ts_us id"`` text: a seek per key, not one per column."""
    op, order = ("<", "DESC") if side == "p" else (">", "ASC")
    x = side
    return (f"(SELECT {x}.ts_us || ' ' || {x}.id FROM memories {x} INDEXED BY memories_session WHERE "
            f"{x}.tenant = {tenant} AND {x}.session = m.session AND {x}.ts_us {op}= m.ts_us AND "
            f"({x}.ts_us {op} m.ts_us OR {x}.id {op} m.id) ORDER BY {x}.ts_us {order}, {x}.id {order} LIMIT 1)")


def adjacent_sql(rows: int) -> str:
    """Each of ``rows`` memories, bound as (id, session, ts_us) triples and then the tenant, with the
    ``"ts_us id"`` keys of the memories right before and after it in its session. The caller's nodes
    carry the session and timestamp, so no row is read by primary key first (100 cold rows at 100k:
    1.1 -> 0.7 ms; inside recall, whose pool rows' pages are already hot, within noise). The
    tenant is bound once and every seek is inside it."""
    tenant = f"?{3 * rows + 1}"
    values = ",".join(["(?,?,?)"] * rows)
    return (f"WITH m(id, session, ts_us) AS (VALUES {values}) "
            f"SELECT m.id, {_neighbour('p', tenant)}, {_neighbour('n', tenant)} FROM m")


def packed_key(text: str | None) -> tuple[int, int] | None:
    """A ``"ts_us id"`` key of :func:`adjacent_sql` as (ts_us, id)."""
    if text is None:
        return None
    ts, _, mem_id = text.partition(" ")
    return int(ts), int(mem_id)


def order_index(session: str | None, turns_only: bool) -> str:
    """The index that serves a (timestamp, id) walk: a session's turns, a session, or the tenant."""
    if session is None:
        return "memories_time"
    return "memories_turns" if turns_only else "memories_session"


class SqliteEdges:
    """Edge reads over the store's connection (``_read``/``_all`` come from the store)."""

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _all(self, sql: str, args: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

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
