"""Lexical search on SQLite FTS5 and on PostgreSQL side by side, over the same LoCoMo turns.

Every turn is written to both graph stores (SQLite: ``graph.sqlite.store``;
PostgreSQL: ``graph.pg``), then each scored question's BM25 terms (``read_query``) run through
the lexical window of both. The lexical ranking alone is scored against the evidence (any@5,
frac@10, MRR@20: the recall pipeline fuses this with vectors, so these are not recall figures);
``overlap@10`` is how many of SQLite's top 10 PostgreSQL also ranks in its top 10.

    python -m bench.scale.pg.lexical --data ../shared/data/locomo_dev.json [--dsn DSN]

Without ``--dsn`` a throwaway server is started (``initdb``/``pg_ctl``, as the tests do).
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import postgres_database
from bench.data.locomo import Conversation, load_locomo
from bench.quality.metrics import Scoreboard
from graph.api import MemoryRecord, RowFilter
from graph.pg import PostgresGraphStore
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from memory_core.recall.query import read_query

LIMIT = 20


def memory_row(mem_id: int, tenant: str, turn: Any) -> MemoryRecord:
    ts_us = int(turn.timestamp.timestamp() * 1_000_000) + turn.position
    return MemoryRecord.from_row({
            "id": mem_id, "tenant": tenant, "session": turn.session, "agent": turn.agent, "type": "turn",
            "role": None, "channel": None, "source": {"id": turn.source_id}, "source_id": turn.source_id,
            "project_id": None, "salience": 0.5, "visibility": "tenant", "ts_us": ts_us, "metadata": {},
            "content": turn.content, "content_len": len(turn.content),
            "content_hash": hashlib.sha256(turn.content.encode()).hexdigest(), "idempotency_key": None})


def run(conversations: list[Conversation], dsn: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = GraphDB(Path(tmp) / "graph.sqlite.db")
        lite = SqliteGraphStore(db)
        pg = PostgresGraphStore(dsn, owner="bench")
        try:
            _load(conversations, db, lite, pg)
            _compare(conversations, db, lite, pg)
        finally:
            pg.close()
            db.close()


def _load(conversations: list[Conversation], db: GraphDB, lite: SqliteGraphStore, pg: PostgresGraphStore) -> None:
    t0 = time.perf_counter()
    next_id = 1
    for conv in conversations:
        rows = []
        for turn in conv.turns:
            rows.append(memory_row(next_id, conv.sample_id, turn))
            next_id += 1
        with lite.transaction() as lt:
            lt.reserve_ids_through(next_id)
            for r in rows:
                lt.write_memory(r)
        with pg.transaction() as tx:
            tx.reserve_ids_through(next_id)
            for r in rows:
                tx.write_memory(r)
    print(f"loaded {next_id - 1} turns of {len(conversations)} conversations into both in "
          f"{time.perf_counter() - t0:.1f} s")


def _compare(conversations: list[Conversation], db: GraphDB, lite: SqliteGraphStore, pg: PostgresGraphStore) -> None:
    boards = {"sqlite": Scoreboard(), "postgres": Scoreboard()}
    times: dict[str, list[float]] = {"sqlite": [], "postgres": []}
    overlap: list[float] = []
    for conv in conversations:
        nodes = lite.memories(conv.sample_id, lite.memory_ids(conv.sample_id))
        sources = {i: str(n.source_id) for i, n in nodes.items()}
        agents = lite.agents(conv.sample_id)
        for qa in conv.qa:
            terms = read_query(qa.question, agents).terms
            t = time.perf_counter()
            a = lite.lexical_window(RowFilter(conv.sample_id), terms, LIMIT)
            times["sqlite"].append(time.perf_counter() - t)
            t = time.perf_counter()
            b = pg.lexical_window(RowFilter(conv.sample_id), terms, LIMIT)
            times["postgres"].append(time.perf_counter() - t)
            ranked = {"sqlite": [sources[h.id] for h in a], "postgres": [sources[h.id] for h in b]}
            for name, board in boards.items():
                board.add(qa.category, ranked[name], qa.evidence)
            top = set(ranked["sqlite"][:10])
            if top:
                overlap.append(len(top & set(ranked["postgres"][:10])) / len(top))
    print(f"{'backend':10} {'any@5':>7} {'frac@10':>8} {'mrr@20':>7} {'p50 ms':>7}")
    for name, board in boards.items():
        m = board.summary()["micro"]
        print(f"{name:10} {m['any@5']:7.3f} {m['frac@10']:8.3f} {m['mrr@20']:7.3f} "
              f"{statistics.median(times[name]) * 1000:7.2f}")
    print(f"overlap@10 (postgres top 10 ∩ sqlite top 10, over sqlite's): {statistics.mean(overlap):.3f} "
          f"over {len(overlap)} questions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="../shared/data/locomo_dev.json")
    parser.add_argument("--dsn", default=None, help="an empty PostgreSQL database (default: a throwaway server)")
    args = parser.parse_args()
    conversations = load_locomo(args.data)
    with postgres_database(args.dsn) as dsn:
        run(conversations, dsn)


if __name__ == "__main__":
    main()
