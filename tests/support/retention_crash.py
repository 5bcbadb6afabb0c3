"""``memory-core retention apply`` (or ``restore``) SIGKILLed at a chosen step, for
tests/reliability/test_retention_crash.py.

``python -m tests.support.retention_crash <crash_at> <graph> <batch> <memory-core arguments...>`` runs the
real command line (``memory_core.launcher.main`` with the given arguments, e.g. ``retention apply --config
C --json``) with every step at the store boundaries counted, as :mod:`tests.support.repair_crash` counts
them: just before and after each vector write (Chroma's upsert and delete) and each graph write
transaction (SQLite's or PostgreSQL's, ``<graph>``). Retention writes ``<batch>`` rows per step (so a short
run has many steps). At step ``crash_at`` the process sends itself SIGKILL — no cleanup, no flush. A run
that finishes first prints ``{"steps": n}`` after the command's own output (``crash_at = 0``: the dry run).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from memory_core.operator import retention
from memory_core.vectors.api import Metadata
from memory_core.vectors.chroma import ChromaVectorStore
from tests.support.repair_crash import Steps, count_transactions


class Killed(Steps):
    """Steps whose chosen one ends the process with SIGKILL (exit status -9 to the parent)."""

    def end(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


def count_vector_writes(steps: Steps) -> None:
    """Every Chroma upsert and delete of this process is two steps (before, after)."""
    upsert, delete = ChromaVectorStore.upsert, ChromaVectorStore.delete

    def counted_upsert(self: ChromaVectorStore, tenant: str, ids: Sequence[str],
                       embeddings: Sequence[Sequence[float]], documents: Sequence[str],
                       metadatas: Sequence[Metadata]) -> None:
        steps.step(f"before upsert {list(ids)}")
        upsert(self, tenant, ids, embeddings, documents, metadatas)
        steps.step(f"after upsert {list(ids)}")

    def counted_delete(self: ChromaVectorStore, tenant: str, ids: Sequence[str]) -> None:
        steps.step(f"before delete {list(ids)}")
        delete(self, tenant, ids)
        steps.step(f"after delete {list(ids)}")

    ChromaVectorStore.upsert = counted_upsert  # type: ignore[method-assign]
    ChromaVectorStore.delete = counted_delete  # type: ignore[method-assign]


def arm_after_open(steps: Steps) -> None:
    """Count steps once the command has opened the store: recovery at open is not part of the run."""
    from memory_core import MemoryCore

    real = MemoryCore.open.__func__  # type: ignore[attr-defined]

    def opened(cls: type[MemoryCore], *args: Any, **kwargs: Any) -> MemoryCore:
        core: MemoryCore = real(cls, *args, **kwargs)
        steps.armed = True
        return core

    MemoryCore.open = classmethod(opened)  # type: ignore[assignment, method-assign]


def main() -> None:
    crash_at, graph, batch, args = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    steps = Killed(crash_at)
    count_transactions(steps, graph)
    count_vector_writes(steps)
    arm_after_open(steps)
    retention.BATCH = batch
    from memory_core import launcher

    sys.argv = ["memory-core", *args]
    code = 0
    try:
        launcher.main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    steps.armed = False
    print(json.dumps({"steps": steps.count, "trace": steps.trace}), flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
