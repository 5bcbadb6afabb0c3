"""Rows and checks shared by the PostgreSQL graph store tests."""

from __future__ import annotations

import hashlib
from itertools import count
from typing import Any

import psycopg

from graph.api import MemoryNode, MemoryRecord
from graph.pg import PostgresGraphStore

T = "acme"
_ts = count(1_000_000, 1000)


def row(mem_id: int, content: str, *, ts: int | None = None, tenant: str = T, session: str = "s1",
        agent: str = "ann", type_: str = "turn", visibility: str = "tenant", channel: str | None = None,
        source_id: str | None = None, project_id: str | None = None, key: str | None = None,
        metadata: dict[str, Any] | None = None) -> MemoryRecord:
    node = MemoryNode(id=mem_id, tenant=tenant, session=session, agent=agent, type=type_, role="user", channel=channel,
                      source={"id": source_id} if source_id else {}, source_id=source_id, project_id=project_id,
                      salience=0.5, visibility=visibility, ts_us=next(_ts) if ts is None else ts,
                      metadata={"b": 1, "a": [2]} if metadata is None else metadata, content_len=len(content),
                      content_hash=hashlib.sha256(content.encode()).hexdigest())
    return MemoryRecord(node, content, key)


def add(store: PostgresGraphStore, *rows: MemoryRecord) -> list[int]:
    with store.transaction() as tx:
        for r in rows:
            tx.write_memory(r)
    return [r.node.id for r in rows]


def ids(store: PostgresGraphStore, n: int) -> list[int]:
    with store.transaction() as tx:
        return tx.allocate_ids(n)


def windows(dsn: str, tenant: str = T) -> dict[int, str]:
    with psycopg.connect(dsn) as conn:
        return {int(i): str(p) for i, p in conn.execute("SELECT id, prev FROM memories WHERE tenant = %s", [tenant])}


def expected_windows(store: PostgresGraphStore, tenant: str = T) -> dict[int, str]:
    """The model: each memory's window is the previous shared memory of its session by (ts_us, id)."""
    out: dict[int, str] = {}
    for stats in store.sessions(tenant):
        keys = sorted(store.page(tenant, stats.session, None, 10_000))
        nodes = store.memories(tenant, [k[1] for k in keys])
        texts = store.contents(tenant, [k[1] for k in keys])
        prev = ""
        for _ts_us, mem_id in keys:
            out[mem_id] = prev
            prev = texts[mem_id] if nodes[mem_id].visibility == "tenant" else ""
    return out
