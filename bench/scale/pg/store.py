"""The PostgreSQL graph store's own costs: adds, open, point reads, pages and lexical search.

Two loads into a throwaway server (or ``--dsn``, an empty database):
- ``--rows`` memories in one tenant through ``PgTxn.write_memory`` (batches of 100, 50
  sessions, 25 random words from a 3,000-word vocabulary each): add throughput, then p50 of
  open, ``memory``, ``page``, ``count``, ``lexical_window`` and ``lexical_phrases``;
- ``--spread`` memories over 100 tenants inserted by SQL (the write path's row, window and
  tsvector, without its counters' per-row cost): lexical p50 per tenant, where a word common to
  every tenant must not cost what all tenants' rows cost.

    python -m bench.scale.pg.store [--rows 20000] [--spread 300000] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import statistics
import time
from collections.abc import Callable

import psycopg

from bench.common import postgres_database
from graph.api import MemoryRecord, RowFilter
from graph.pg import PostgresGraphStore

VOCABULARY = [f"w{i}" for i in range(3000)] + ["kiln", "thursday", "move", "the", "a", "to"] * 200


def memory_row(mem_id: int, tenant: str, session: str, content: str) -> MemoryRecord:
    return MemoryRecord.from_row({
            "id": mem_id, "tenant": tenant, "session": session, "agent": "ann", "type": "turn", "role": "user",
            "channel": None, "source": {}, "source_id": None, "project_id": None, "salience": 0.5,
            "visibility": "tenant", "ts_us": mem_id * 1000, "metadata": {}, "content": content,
            "content_len": len(content), "content_hash": hashlib.sha256(content.encode()).hexdigest(),
            "idempotency_key": None})


def p50_ms(fn: Callable[[int], object], n: int = 50) -> float:
    times = []
    for i in range(n):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def one_tenant(dsn: str, rows: int) -> None:
    rng = random.Random(1)
    store = PostgresGraphStore(dsn, owner="bench", pool_size=4)
    try:
        t = time.perf_counter()
        for _batch in range(rows // 100):
            with store.transaction() as tx:
                for i in tx.allocate_ids(100):
                    tx.write_memory(memory_row(i, "solo", f"s{i % 50}", " ".join(rng.choices(VOCABULARY, k=25))))
        load = time.perf_counter() - t

        def single(_: int) -> None:
            with store.transaction() as tx:
                (i,) = tx.allocate_ids(1)
                tx.write_memory(memory_row(i, "solo", "s1", " ".join(rng.choices(VOCABULARY, k=25))))

        f = RowFilter("solo")
        figures = {
            "add (one per transaction)": p50_ms(single, 200),
            "open (migrations checked, pool, heartbeat)": p50_ms(lambda _: PostgresGraphStore(
                dsn, owner="x").close(), 5),
            "memory(id)": p50_ms(lambda i: store.memory("solo", 1 + i)),
            "page(session, 20)": p50_ms(lambda i: store.page("solo", f"s{i % 50}", None, 20)),
            "count(tenant)": p50_ms(lambda _: store.count("solo")),
            "lexical_window, 2 rare words": p50_ms(lambda i: store.lexical_window(f, [f"w{i}", f"w{2999 - i}"], 50)),
            "lexical_window, 2 rare + 2 common": p50_ms(
                lambda i: store.lexical_window(f, ["kiln", f"w{i}", "thursday", f"w{i + 7}"], 50)),
            "lexical_phrases, 2 common words": p50_ms(lambda _: store.lexical_phrases(f, ["kiln thursday"], 50)),
        }
        print(f"one tenant, {rows} memories: {rows / load:.0f} adds/s in batches of 100")
        for name, ms in figures.items():
            print(f"  {name:45} p50 {ms:8.2f} ms")
    finally:
        store.close()


def spread(dsn: str, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        t = time.perf_counter()
        conn.execute(
            "INSERT INTO memories (id, tenant, session, agent, type, source, salience, visibility, ts_us, metadata, "
            "content, content_len, content_hash) SELECT nextval('item_ids'), 'm' || (x.g %% 100), "
            "'s' || (x.g %% 1000), 'ann', 'turn', '{}', 0.5, 'tenant', x.g, '{}', b.body || ' meeting', 10, 'h' "
            "FROM generate_series(1, %s) AS x(g), "
            "LATERAL (SELECT string_agg('w' || floor(random() * 3000)::int, ' ') AS body "
            "FROM generate_series(1, 20 + x.g * 0)) AS b", [rows])
        conn.execute("INSERT INTO tenant_state (tenant, memories, lex_len_sum) SELECT tenant, count(*), "
                     "sum(length(tsv_win)) FROM memories WHERE tenant LIKE 'm%' GROUP BY tenant")
        conn.execute("ANALYZE memories")
        load = time.perf_counter() - t
    store = PostgresGraphStore(dsn, owner="bench")
    try:
        rare = p50_ms(lambda i: store.lexical_window(RowFilter(f"m{i % 100}"), [f"w{i}", f"w{2999 - i}"], 20))
        shared = p50_ms(lambda i: store.lexical_window(RowFilter(f"m{i % 100}"), [f"w{i}", "meeting"], 20))
    finally:
        store.close()
    print(f"100 tenants, {rows} memories (SQL load {load:.0f} s)")
    print(f"  {'lexical_window, 2 rare words':45} p50 {rare:8.2f} ms")
    print(f"  {'lexical_window, rare + one in every row':45} p50 {shared:8.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--spread", type=int, default=300_000)
    parser.add_argument("--dsn", default=None, help="an empty database (default: a throwaway server)")
    args = parser.parse_args()
    with postgres_database(args.dsn) as dsn:
        one_tenant(dsn, args.rows)
        spread(dsn, args.spread)


if __name__ == "__main__":
    main()
