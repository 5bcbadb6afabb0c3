"""``memory-core import`` killed at a chosen step, for tests/reliability/test_import_crash.py.

``python -m tests.support.import_crash <data_dir> <crash_at> <storage JSON> <source> <path>`` opens
the store as tests/support/repair_crash.py does (embedded Chroma, the deterministic embedder;
SQLite, or the graph the storage settings name) and imports ``path`` into tenant ``acme``:
memory-core's JSONL when ``source`` is ``jsonl``, else the other tool's format ``source``. Every
vector write and graph write transaction is a step, before and after; at step ``crash_at`` the
process ends with ``os._exit`` (no cleanup, as after SIGKILL). Batches are made small so a short
file is written in many of them. When the import finishes first it prints ``{"steps": N}``; with
``crash_at = 0`` that is the dry run that tells the test how many steps to try.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memory_core.importers import import_source, source
from memory_core.operator import jsonl_import as jsonl
from tests.support.repair_crash import Steps, count_transactions, open_store

TENANT = "acme"
JSONL_BATCH = 4
SOURCE_BATCH = 3


def run_import(core: Any, kind: str, path: Path) -> dict[str, Any]:
    """The import the test runs, killed or whole (the same small batches either way)."""
    jsonl.IMPORT_BATCH = JSONL_BATCH
    source.WRITE_BATCH = SOURCE_BATCH
    if kind == "jsonl":
        with path.open("rb") as fh:
            return jsonl.import_lines(core.operator_parts(), fh, TENANT).to_dict()
    return import_source(core.operator_parts(), kind, path, TENANT).to_dict()


def main() -> None:
    data_dir, crash_at = Path(sys.argv[1]), int(sys.argv[2])
    storage: dict[str, Any] = json.loads(sys.argv[3])
    kind, path = sys.argv[4], Path(sys.argv[5])
    steps = Steps(crash_at)
    count_transactions(steps, str(storage.get("graph", "sqlite")))
    core = open_store(data_dir, storage, steps)
    steps.armed = True  # recovery at open is not part of the import
    done = run_import(core, kind, path)
    steps.armed = False
    core.close()
    print(json.dumps({"steps": steps.count, "written": done["written"], "trace": steps.trace}), flush=True)


if __name__ == "__main__":
    main()
