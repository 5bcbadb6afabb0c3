"""What the vector-store deadline costs per call: embedded Chroma raw vs behind DeadlineVectorStore.

    python -m bench.latency.vector_deadline [--rows 2000] [--calls 300]

Both sides use the very same embedded collection; calls are interleaved, so noise hits both
alike. The wrapper runs each call on its own daemon thread and waits with a deadline (see
memory_core/vectors/deadline.py); the ratio shows what that adds to a query and an upsert.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.common import percentiles
from memory_core.vectors.chroma import ChromaVectorStore
from memory_core.vectors.deadline import DeadlineVectorStore


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as tmp:
        raw = ChromaVectorStore.persistent(Path(tmp) / "chroma")
        wrapped = DeadlineVectorStore(raw, 30.0)
        for start in range(0, args.rows, 500):
            n = min(500, args.rows - start)
            raw.upsert("bench", [f"mem:{start + i}" for i in range(n)], rng.random((n, 384)).tolist(),
                       [f"row {start + i}" for i in range(n)], [{"kind": "memory"}] * n)
        samples: dict[str, list[float]] = {"query raw": [], "query deadline": [], "upsert raw": [],
                                           "upsert deadline": []}
        for i in range(args.calls):
            q = rng.random(384).tolist()
            for label, store in (("raw", raw), ("deadline", wrapped)):
                t = time.perf_counter()
                store.query("bench", q, 10)
                samples[f"query {label}"].append(time.perf_counter() - t)
                t = time.perf_counter()
                store.upsert("bench", [f"new:{label}:{i}"], [q], ["new row"], [{"kind": "memory"}])
                samples[f"upsert {label}"].append(time.perf_counter() - t)
        stats = {k: percentiles(v) for k, v in samples.items()}
        print(f"{'call':<18}{'p50 ms':>10}{'p95 ms':>10}")
        for k, v in stats.items():
            print(f"{k:<18}{v['p50_ms']:>10.3f}{v['p95_ms']:>10.3f}")
        for op in ("query", "upsert"):
            ratio = stats[f"{op} deadline"]["p50_ms"] / stats[f"{op} raw"]["p50_ms"]
            print(f"{op}: deadline/raw p50 = {ratio:.2f}")


if __name__ == "__main__":
    main()
