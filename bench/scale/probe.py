"""One cold-start measurement of a scale store, run by :mod:`bench.scale.run` in a fresh process.

    python -m bench.scale.probe STORE --tenants t000,t001 [--queries 100] [--page-sessions 8] [--page-reps 300]

Prints one JSON object (the last line of stdout). In order: RSS after imports; ``MemoryCore.open``
(cold open) and RSS right after it; the first read (a ``query_recent_turns`` page, so "open to
ready for a read" = open + first read); first-page latency of ``query_recent_turns`` over the
first sessions of the tenants; the real MiniLM query embedder loaded (RSS after it); a recall
workload round robin over the tenants (the first recall opens Chroma: ``first_recall_s``; the
first two a tenant are reported apart as ``first_recalls``), interleaved with (query embedding +
raw Chroma query) on the same tenant's collection, with recall's own time per stage (p50 of
``diagnostics["stages_ms"]``) and the baseline's two parts; RSS after the workload and the peak (VmHWM).
Only APIs that exist on today's main are used: the figures are comparable across the rewrite.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import open_bench_core, percentiles
from bench.latency.recall import MixedEmbedder, chroma_of, zipf_words
from memory_core.embedding.local import shared_minilm
from memory_core.vectors.chroma import collection_name

WARM_QUERIES = 2  # per tenant, before the timed ones (reported apart as "first recall")


def rss_mb(field: str = "VmRSS") -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"{field} not in /proc/self/status")


def page_latency(core: Any, tenants: list[str], sessions: int, reps: int) -> dict[str, Any]:
    """First page (limit 20) of sessions s00000.. of each tenant, round robin."""
    samples = []
    for i in range(reps):
        tenant, session = tenants[i % len(tenants)], f"s{(i // len(tenants)) % sessions:05d}"
        t = time.perf_counter()
        page = core.query_recent_turns(tenant, session, limit=20)
        samples.append(time.perf_counter() - t)
        if not page.turns:
            raise SystemExit(f"session {session} of {tenant} is empty: the store is not the one built")
    return percentiles(samples)


def recall_workload(core: Any, embedder: MixedEmbedder, tenants: list[str], queries: list[str]) -> dict[str, Any]:
    embedder.bulk = False
    collections: dict[str, Any] = {}  # fetched after the tenant's first recall, which may open Chroma
    first, ours, base = [], [], []
    stages: list[dict[str, float]] = []
    base_parts: list[dict[str, float]] = []  # the baseline's embedding and Chroma query, apart
    for i, q in enumerate(queries):  # interleaved, so noise hits both sides alike
        tenant = tenants[i % len(tenants)]
        viewer = f"agent{i % 5}"
        t = time.perf_counter()
        result = core.recall(tenant, q, viewer=viewer, limit=10)
        took = time.perf_counter() - t
        (first if i < WARM_QUERIES * len(tenants) else ours).append(took)
        if i >= WARM_QUERIES * len(tenants):
            stages.append(result.diagnostics.get("stages_ms", {}))
        if tenant not in collections:
            collections[tenant] = chroma_of(core)._client.get_collection(collection_name("mc", tenant),
                                                                          embedding_function=None)
        t = time.perf_counter()
        vector = embedder.embed([q])
        embedded = time.perf_counter()
        collections[tenant].query(query_embeddings=vector, n_results=10, include=["distances"])
        if i >= WARM_QUERIES * len(tenants):
            base.append(time.perf_counter() - t)
            base_parts.append({"embed": (embedded - t) * 1000, "chroma": (time.perf_counter() - embedded) * 1000})
    embedder.bulk = True
    return {"first_recall_s": round(first[0], 3), "first_recalls": percentiles(first), "recall": percentiles(ours),
            "baseline": percentiles(base), "recall_stages_p50_ms": stage_medians(stages),
            "baseline_parts_p50_ms": stage_medians(base_parts)}


def stage_medians(stages: list[dict[str, float]]) -> dict[str, float]:
    """The p50 of each stage of recall (``diagnostics["stages_ms"]``) over the timed recalls: where the time goes."""
    names = dict.fromkeys(k for s in stages for k in s)
    return {k: round(float(np.median([s.get(k, 0.0) for s in stages])), 2) for k in names}


def probe(store: Path, tenants: list[str], queries: int, page_sessions: int, page_reps: int) -> dict[str, Any]:
    out: dict[str, Any] = {"tenants_probed": len(tenants), "loadavg_1m": round(os.getloadavg()[0], 2),
                           "rss_after_imports_mb": rss_mb()}
    embedder = MixedEmbedder()
    t, cpu = time.perf_counter(), time.process_time()
    core = open_bench_core(store, embedder)
    out["cold_open_s"] = round(time.perf_counter() - t, 3)
    out["cold_open_cpu_s"] = round(time.process_time() - cpu, 3)  # what other processes' load does not inflate
    out["rss_after_open_mb"] = rss_mb()
    try:
        t = time.perf_counter()
        core.query_recent_turns(tenants[0], "s00000", limit=20)
        out["first_read_s"] = round(time.perf_counter() - t, 3)
        out["open_to_first_read_s"] = round(out["cold_open_s"] + out["first_read_s"], 3)
        out["recent_page"] = page_latency(core, tenants, page_sessions, page_reps)
        shared_minilm().embed(["warm up the query model"])
        out["rss_after_model_mb"] = rss_mb()
        rng = np.random.default_rng(11)
        total = max(queries, len(tenants)) + WARM_QUERIES * len(tenants)
        out.update(recall_workload(core, embedder, tenants, [" ".join(zipf_words(rng, 5)) for _ in range(total)]))
        out["rss_after_recall_mb"] = rss_mb()
        out["rss_peak_mb"] = rss_mb("VmHWM")
    finally:
        core.close()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("store", type=Path)
    parser.add_argument("--tenants", required=True, help="comma-separated tenants for the workload")
    parser.add_argument("--queries", type=int, default=100, help="timed recalls (after the warm-up ones)")
    parser.add_argument("--page-reps", type=int, default=300)
    parser.add_argument("--page-sessions", type=int, default=8, help="sessions s00000.. paged in each tenant")
    args = parser.parse_args(argv)
    found = probe(args.store, args.tenants.split(","), args.queries, args.page_sessions, args.page_reps)
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main()
