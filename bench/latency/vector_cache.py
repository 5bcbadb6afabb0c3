"""What the embedded Chroma keeps loaded, with and without ``storage.vector_cache_mb``.

    python -m bench.latency.vector_cache [--tenants 12] [--rows 20000] [--rounds 3] [--budgets 0,300,150]

Builds (once, cached under ``~/.cache/memory-core-bench/vector_cache``) an embedded Chroma with
``--tenants`` collections of ``--rows`` synthetic 384-d vectors each, through the vector store the
product uses. Then, for each budget (0: no bound), a fresh process opens it and queries the
tenants round robin for ``--rounds`` rounds: resident memory after each round and at its peak,
query latency (a tenant's first query after its index was released reloads it), and releases.
The arms run one after another on the same files, so their RSS and latency compare directly.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import percentiles, print_table, stage
from bench.scale.probe import rss_mb
from memory_core.vectors.api import VectorStore
from memory_core.vectors.cache import VectorCacheBudget
from memory_core.vectors.chroma import ChromaVectorStore

CACHE = Path.home() / ".cache" / "memory-core-bench" / "vector_cache"
DIM = 384


def build(path: Path, tenants: int, rows: int) -> None:
    store = ChromaVectorStore.persistent(path)
    rng = np.random.default_rng(11)
    for t in range(tenants):
        for start in range(0, rows, 5000):
            n = min(5000, rows - start)
            vecs = rng.standard_normal((n, DIM)).astype(np.float32)
            ids = [f"mem:{i}" for i in range(start, start + n)]
            store.upsert(f"t{t:03d}", ids, vecs.tolist(), [""] * n, [{"kind": "memory"}] * n)
    store.close()


def probe(path: Path, tenants: int, rows: int, rounds: int, budget_mb: int) -> dict[str, Any]:
    out: dict[str, Any] = {"rss_open_mb": rss_mb()}
    chroma = ChromaVectorStore.persistent(path)
    store: VectorStore = VectorCacheBudget(chroma, budget_mb << 20, lambda _t: rows) if budget_mb else chroma
    rng = np.random.default_rng(5)
    first, warm, per_round = [], [], []
    for _round in range(rounds):
        for t in range(tenants):
            for q in range(5):
                v = rng.standard_normal(DIM).tolist()
                start = time.perf_counter()
                store.query(f"t{t:03d}", v, 10)
                (first if q == 0 else warm).append(time.perf_counter() - start)
        per_round.append(rss_mb())
    out.update(rss_by_round_mb=per_round, rss_peak_mb=rss_mb("VmHWM"), first_query=percentiles(first),
               other_queries=percentiles(warm),
               releases=store.releases if isinstance(store, VectorCacheBudget) else 0)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, default=12)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--budgets", default="0,300,150", help="MB each; 0 = no bound")
    parser.add_argument("--probe", nargs=2, metavar=("STORE", "BUDGET_MB"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(Path(args.probe[0]), args.tenants, args.rows, args.rounds, int(args.probe[1]))))
        return
    path = CACHE / f"t{args.tenants}-r{args.rows}"
    if not (path / "chroma.sqlite3").exists():
        with stage(f"build {args.tenants} x {args.rows} rows"):
            build(path, args.tenants, args.rows)
    rows = []
    for budget in (int(b) for b in args.budgets.split(",")):
        cmd = [sys.executable, "-m", "bench.latency.vector_cache", "--tenants", str(args.tenants),
               "--rows", str(args.rows), "--rounds", str(args.rounds), "--probe", str(path), str(budget)]
        res = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        rows.append([budget or "no bound", res["rss_open_mb"], " / ".join(str(x) for x in res["rss_by_round_mb"]),
                     res["rss_peak_mb"], res["first_query"]["p50_ms"], res["first_query"]["p95_ms"],
                     res["other_queries"]["p50_ms"], res["releases"]])
    title = f"{args.tenants} tenants x {args.rows} rows, {args.rounds} rounds round robin (5 queries a tenant each)"
    print_table(title,
                ["budget MB", "RSS open", "RSS after each round", "RSS peak", "1st query p50 ms", "1st p95",
                 "others p50 ms", "releases"], rows)


if __name__ == "__main__":
    main()
