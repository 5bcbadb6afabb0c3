"""The entity listing (``MemoryCore.list_entities`` → ``GraphStore.entities``) on SQLite at
20k memories / 60k mentions: the unbounded scan (every entity, as before) against the bounded
default (the 100 most mentioned), and the old statement against the new one, side by side.

    PYTHONPATH=. python -m bench.latency.entity_list [--memories 20000] [--per 3] [--entities 5000] [--runs 20]
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from graph.api import EntitySpec, MemoryRecord
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from memory_core.entities.service import DEFAULT_LIST

# the statement GraphStore.entities ran before the listing aggregated from the mentions index
OLD_SQL = ("SELECT e.id, e.name, e.kind, e.created_us, count(*) AS n FROM entities e JOIN mentions m ON "
           "m.entity_id = e.id AND (shared = 1 OR agent = ?) WHERE e.tenant = ? GROUP BY e.id "
           "ORDER BY n DESC, e.name, e.id LIMIT ?")


def _row(i: int, agent: str, private: bool) -> MemoryRecord:
    text = f"note {i}"
    return MemoryRecord.from_row({
            "id": i, "tenant": "acme", "session": f"s{i % 50}", "agent": agent, "type": "note", "role": None,
            "channel": None, "source": {}, "source_id": None, "project_id": None, "salience": 0.5,
            "visibility": "agent" if private else "tenant", "ts_us": 1_700_000_000_000_000 + i, "metadata": {},
            "content": text, "content_len": len(text), "content_hash": hashlib.sha256(text.encode()).hexdigest(),
            "idempotency_key": None})


def build(path: Path, memories: int, per: int, entities: int) -> SqliteGraphStore:
    store = SqliteGraphStore(GraphDB(path))
    with store.transaction() as tx:
        tx.reserve_ids_through(memories + 1)
    for start in range(1, memories + 1, 1000):
        with store.transaction() as tx:
            for i in range(start, min(start + 1000, memories + 1)):
                tx.write_memory(_row(i, ("ann", "bob", "cat")[i % 3], i % 10 == 0))
                names = [f"entity {(i * 7 + k * 13) % entities}" for k in range(per)]
                tx.link_entities("acme", i, [EntitySpec(n) for n in dict.fromkeys(names)], [], 1)
    return store


def timed(fn: Callable[[], object], runs: int) -> float:
    fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--per", type=int, default=3)
    parser.add_argument("--entities", type=int, default=5_000)
    parser.add_argument("--runs", type=int, default=20)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = build(Path(tmp) / "graph.sqlite3", a.memories, a.per, a.entities)
        mentions = len(store.all_mentions("acme"))

        def old(limit: int) -> Callable[[], object]:
            return lambda: store.entity_index.q.all(OLD_SQL, ("bob", "acme", limit))

        cases = {
            "old statement, every entity": old(-1),
            f"old statement, top {DEFAULT_LIST}": old(DEFAULT_LIST),
            "new statement, every entity": lambda: store.entities("acme", "bob"),
            f"new statement, top {DEFAULT_LIST} (default)": lambda: store.entities("acme", "bob", limit=DEFAULT_LIST),
        }
        print(f"{a.memories} memories, {mentions} mentions, {a.entities} entities; median of {a.runs} runs")
        for name, fn in cases.items():
            print(f"  {name:<40} {timed(fn, a.runs):8.2f} ms")
        store.close()


if __name__ == "__main__":
    main()
