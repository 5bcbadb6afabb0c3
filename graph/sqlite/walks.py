"""The SQL of the SQLite store's walks in (timestamp, id) order: the index each walk names, and the
one-statement join that finds each memory's neighbours in its session (recall's context)."""

from __future__ import annotations


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
