"""Writes of other tenants while a big tenant's index loads (its first recall after a start).

    python -m bench.latency.index_load STORE --tenant bench [--cold] [--seconds 60] [--deadline 30]

Embedded Chroma loads a collection's whole HNSW index on its first query, and holds a lock every
write takes meanwhile, in every collection. This opens STORE (a fresh process: nothing loaded),
starts the first recall of ``--tenant`` on a thread, and meanwhile adds a memory to a probe tenant
(``index-load-probe``, created in STORE: run it on a copy of a bench store) every half second,
for ``--seconds`` or until the recall returned and three adds went through; ``--preload`` first
loads the tenant's index as a server does right after it starts. ``--cold`` first
drops the kernel's page cache (root only), as after a reboot or a long idle. Prints one JSON
object: the recall's time and whether its vector branch answered, each add's latency and outcome,
and whether the store was left wedged.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import open_bench_core
from bench.latency.recall import MixedEmbedder
from memory_core import MemoryCoreError
from memory_core.embedding.local import shared_minilm
from memory_core.vectors.deadline import vector_store_wedged

PROBE = "index-load-probe"


def drop_page_cache() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("1\n")


def run(store: Path, tenant: str, seconds: float, deadline: float | None, preload: bool) -> dict[str, Any]:
    embedder = MixedEmbedder()
    core = open_bench_core(store, embedder)
    if deadline is not None:
        core._vectors.deadline_s = deadline  # type: ignore[attr-defined]
    embedder.bulk = False
    shared_minilm().warm_up()
    core.recall("index-load-nobody", "open the client", limit=1)  # Chroma open, no index loaded
    out: dict[str, Any] = {"deadline_s": getattr(core._vectors, "deadline_s", None)}
    if preload:  # what a server does right after it starts (MemoryCore.warm_up_in_background)
        t = time.perf_counter()
        out["preloaded"] = core.preload_indexes([tenant])
        out["preload_s"] = round(time.perf_counter() - t, 2)
    recall: dict[str, Any] = {}
    started = time.perf_counter()

    def first_recall() -> None:
        try:
            res = core.recall(tenant, "what did we decide about the release", limit=10)
            recall["vector_branch"] = res.diagnostics.get("vector_search", "answered")
        except MemoryCoreError as exc:
            recall["error"] = exc.code
        recall["s"] = round(time.perf_counter() - started, 2)

    thread = threading.Thread(target=first_recall, daemon=True)
    thread.start()
    adds: list[dict[str, Any]] = []
    while time.perf_counter() - started < seconds:
        time.sleep(0.5)
        t = time.perf_counter()
        try:
            core.add_memory(PROBE, "s1", "probe", f"probe write {len(adds)} while an index loads")
            outcome = "ok"
        except MemoryCoreError as exc:
            outcome = exc.code
        adds.append({"at_s": round(t - started, 2), "took_s": round(time.perf_counter() - t, 3), "outcome": outcome})
        if not thread.is_alive() and sum(a["outcome"] == "ok" for a in adds[-3:]) == 3:
            break
    thread.join()
    out.update(first_recall=recall, adds=len(adds), adds_failed=sum(a["outcome"] != "ok" for a in adds),
               slowest_add_s=max((a["took_s"] for a in adds), default=0.0), add_log=adds,
               wedged_after=vector_store_wedged(core._vectors))
    core.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--cold", action="store_true", help="drop the page cache first (root)")
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--deadline", type=float, default=None, help="storage.vector_deadline_s (default: config)")
    parser.add_argument("--preload", action="store_true", help="load its index first, as a server does")
    args = parser.parse_args(argv)
    if args.cold:
        drop_page_cache()
    found = run(args.store, args.tenant, args.seconds, args.deadline, args.preload)
    found["cold"] = args.cold
    found["loadavg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
