"""``doctor --repair`` killed at a chosen step, for tests/reliability/test_doctor_crash.py.

``python -m tests.support.repair_crash <data_dir> <crash_at> [<storage JSON>]`` opens the store
(embedded Chroma, the deterministic embedder; SQLite, or the graph the storage settings name:
PostgreSQL) and runs :func:`memory_core.operator.doctor.run.repair_stores`, counting every step at the store
boundaries while the repair runs: just before and just after each vector-store write (upsert,
delete) and each graph write transaction (SQLite's or PostgreSQL's). At step
``crash_at`` the process ends with ``os._exit`` — no cleanup, no flush, as after SIGKILL.
When the repair finishes first, it prints ``{"steps": <how many there were>}``; run with
``crash_at = 0`` that is the dry run that tells the test how many steps to try.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from graph.sqlite.db import GraphDB
from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.operator.doctor.run import repair_stores
from memory_core.settings import load_settings
from memory_core.vectors.api import Metadata
from memory_core.vectors.chroma import ChromaVectorStore

CRASH_EXIT = 77


class Steps:
    """Counts steps once armed; ends the process at the chosen one."""

    def __init__(self, crash_at: int) -> None:
        self.crash_at = crash_at
        self.count = 0
        self.armed = False
        self.trace: list[str] = []

    def step(self, what: str) -> None:
        if not self.armed:
            return
        self.count += 1
        self.trace.append(what)
        if self.count == self.crash_at:
            print(json.dumps({"crashed_at": self.count, "step": what}), flush=True)
            self.end()

    def end(self) -> None:
        """How the process ends at the chosen step: at once, with CRASH_EXIT (no cleanup, no flush)."""
        os._exit(CRASH_EXIT)


class CrashingVectorStore(ChromaVectorStore):
    """Embedded Chroma whose writes are steps."""

    steps: Steps

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        self.steps.step(f"before upsert {list(ids)}")
        super().upsert(tenant, ids, embeddings, documents, metadatas)
        self.steps.step(f"after upsert {list(ids)}")

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self.steps.step(f"before delete {list(ids)}")
        super().delete(tenant, ids)
        self.steps.step(f"after delete {list(ids)}")


def open_store(data_dir: Path, storage: dict[str, Any] | None = None, steps: Steps | None = None) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "storage": storage or {}})
    if steps is None:
        return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())
    import chromadb

    client = chromadb.PersistentClient(path=str(data_dir / "chroma"),
                                       settings=chromadb.Settings(anonymized_telemetry=False, allow_reset=False))
    vectors = CrashingVectorStore(client, settings.storage.collection_prefix)
    vectors.steps = steps
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder(), vector_store=vectors)


def count_transactions(steps: Steps, graph: str) -> None:
    if graph == "postgres":
        from graph.pg.store import PostgresGraphStore

        real_pg = PostgresGraphStore.transaction

        @contextmanager
        def counted_pg(self: PostgresGraphStore) -> Iterator[Any]:
            steps.step("before a PostgreSQL transaction")
            with real_pg(self) as tx:
                yield tx
            steps.step("after a PostgreSQL commit")

        PostgresGraphStore.transaction = counted_pg  # type: ignore[method-assign]
        return
    real = GraphDB.transaction

    @contextmanager
    def counted(self: GraphDB) -> Iterator[Any]:
        steps.step("before a SQLite transaction")
        with real(self) as cur:
            yield cur
        steps.step("after a SQLite commit")

    GraphDB.transaction = counted  # type: ignore[method-assign]


def main() -> None:
    data_dir, crash_at = Path(sys.argv[1]), int(sys.argv[2])
    storage: dict[str, Any] = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    steps = Steps(crash_at)
    count_transactions(steps, str(storage.get("graph", "sqlite")))
    core = open_store(data_dir, storage, steps)
    steps.armed = True  # recovery at open is not part of the repair
    report = repair_stores(core.operator_parts())
    steps.armed = False
    core.close()
    print(json.dumps({"steps": steps.count, "ok": report.ok, "trace": steps.trace}), flush=True)


if __name__ == "__main__":
    main()
