"""The PostgreSQL store's kept counts: reads that must cost what they show, not the tenant's size.

For each size, one tenant is loaded through ``PgTxn.write_memory`` (batches of 100, 50 sessions,
8 agents, 3 channels, rows spread over 365 UTC days), then p50 of ``counts_by_day`` (a year),
``field_counts`` (agents), ``field_count``, ``private_count``, ``sessions_in_channel`` and
``count`` (the O(1) baseline), the inspector's neighbourhood (depth 2, 120 nodes; cold and
cached), beside ``memory_ids`` (a scan of every row, for scale). Every row mentions the entity
"Hub" and one of 100 topics, and one row in 500 "Rare": recall's entity branch reads
``entity_mention_counts`` for a query's entities and ``entity_names``; the inspector and
``memory-core entities`` read ``entity`` and the listing (``entities``, 20 most mentioned).
Sizes are printed side by side: a kept count or a neighbourhood reads the same at every size,
the scan grows with it.

    python -m bench.scale.pg.counts [--sizes 2000 20000] [--dsn DSN]
"""

from __future__ import annotations

import argparse
import hashlib

from bench.common import postgres_database
from bench.scale.pg.store import p50_ms
from graph.api import EntitySpec, MemoryRecord
from graph.keys import DAY_US
from graph.pg import PostgresGraphStore

DAY0 = 20_000


def _row(mem_id: int, tenant: str) -> MemoryRecord:
    content = f"memory {mem_id}"
    return MemoryRecord.from_row({
            "id": mem_id, "tenant": tenant, "session": f"s{mem_id % 50}", "agent": f"a{mem_id % 8}",
            "type": ("turn", "fact")[mem_id % 7 == 0], "role": "user", "channel": f"c{mem_id % 3}", "source": {},
            "source_id": None, "project_id": None, "salience": 0.5, "visibility": ("tenant", "agent")[mem_id % 5 == 0],
            "ts_us": (DAY0 + mem_id % 365) * DAY_US + mem_id, "metadata": {}, "content": content,
            "content_len": len(content), "content_hash": hashlib.sha256(content.encode()).hexdigest(),
            "idempotency_key": None})


def _mentioned(i: int) -> list[EntitySpec]:
    return [EntitySpec("Hub"), EntitySpec(f"Topic {i % 100}"), *([EntitySpec("Rare")] if i % 500 == 0 else [])]


def measure(store: PostgresGraphStore, tenant: str, rows: int) -> dict[str, float]:
    made: list[int] = []
    for _batch in range(rows // 100):
        with store.transaction() as tx:
            for i in tx.allocate_ids(100):
                tx.write_memory(_row(i, tenant))
                tx.link_entities(tenant, i, _mentioned(i), [], 0)
                made.append(i)
    first = made[len(made) // 2]
    found = store.entity_ids(tenant, ["hub", "rare", "topic 7"])
    hub, rare, topic = found["hub"], found["rare"], found["topic 7"]
    return {
        "entity_mention_counts(3 entities)": p50_ms(lambda i: store.entity_mention_counts(
            tenant, [hub, rare, topic], f"a{i % 8}", 100_000)),
        "entity_names(3 entities)": p50_ms(lambda i: store.entity_names(tenant, [hub, rare, topic], f"a{i % 8}")),
        "entity(hub)": p50_ms(lambda i: store.entity(tenant, hub, f"a{i % 8}")),
        "entities(20 most mentioned)": p50_ms(lambda i: store.entities(tenant, f"a{i % 8}", limit=20), 20),
        "count(tenant)": p50_ms(lambda _: store.count(tenant)),
        "counts_by_day(365 days)": p50_ms(lambda _: store.counts_by_day(tenant, DAY0, 365)),
        "field_counts(agent)": p50_ms(lambda _: store.field_counts(tenant, "agent")),
        "field_count(agent)": p50_ms(lambda i: store.field_count(tenant, "agent", f"a{i % 8}")),
        "private_count": p50_ms(lambda _: store.private_count(tenant)),
        "sessions_in_channel": p50_ms(lambda i: store.sessions_in_channel(tenant, f"c{i % 3}")),
        # the inspector's view: depth 2, 120 nodes, 8 children, hubs past 200 (its sessions hold rows/50)
        "neighbourhood, cold (new root)": p50_ms(lambda i: store.neighbourhood(tenant, f"mem:{first + i}", 2, 120,
                                                                               200, 8), 20),
        "neighbourhood, cached (same root)": p50_ms(lambda _: store.neighbourhood(tenant, f"mem:{first}", 2, 120,
                                                                                  200, 8)),
        "memory_ids (a scan, for scale)": p50_ms(lambda _: store.memory_ids(tenant), 5),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000])
    parser.add_argument("--dsn", default=None, help="an empty database (default: a throwaway server)")
    args = parser.parse_args()
    with postgres_database(args.dsn) as dsn:
        store = PostgresGraphStore(dsn, owner="bench-counts", pool_size=4)
        try:
            results = {n: measure(store, f"t{n}", n) for n in args.sizes}
        finally:
            store.close()
    sizes = list(results)
    print(f"{'p50 ms':34}" + "".join(f"{n:>12,}" for n in sizes) + f"{'ratio':>9}")
    for name in results[sizes[0]]:
        first, last = results[sizes[0]][name], results[sizes[-1]][name]
        print(f"{name:34}" + "".join(f"{results[n][name]:12.2f}" for n in sizes) + f"{last / first:8.1f}x")


if __name__ == "__main__":
    main()
