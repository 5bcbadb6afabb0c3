"""``memory-core consolidate`` killed at a chosen step, for tests/reliability/test_consolidation_crash.py.

``python -m tests.support.consolidate_crash <data_dir> <crash_at> [<storage JSON>]`` opens the store as
:mod:`tests.support.repair_crash` does (embedded Chroma whose writes are steps, every graph write
transaction a step) and runs :func:`memory_core.operator.consolidation.consolidate` in batches of two
merges (so a run has many write-path calls to be killed between). At step ``crash_at`` the process ends
with ``os._exit``; a run that finishes first prints ``{"steps": n}`` (``crash_at = 0``: the dry run).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from memory_core.operator import consolidation
from tests.support.repair_crash import Steps, count_transactions, open_store

BATCH = 2


def main() -> None:
    data_dir, crash_at = Path(sys.argv[1]), int(sys.argv[2])
    storage: dict[str, Any] = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    steps = Steps(crash_at)
    count_transactions(steps, str(storage.get("graph", "sqlite")))
    core = open_store(data_dir, storage, steps)
    consolidation.WRITE_BATCH = BATCH
    steps.armed = True  # recovery at open is not part of the run
    report = consolidation.consolidate(core.operator_parts())
    steps.armed = False
    core.close()
    print(json.dumps({"steps": steps.count, "merges": len(report.merges), "trace": steps.trace}), flush=True)


if __name__ == "__main__":
    main()
