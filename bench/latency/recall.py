"""Recall latency at 1k, 10k and 100k memories, next to (query embedding + raw Chroma query).

    python -m bench.latency.recall [--sizes 1000,10000,100000] [--queries 60] [--json PATH]

Rows are loaded through the real write path with synthetic vectors (the real model costs
~12 ms a row) and Zipf-distributed words from a 20k-word vocabulary, so BM25 sees
realistic posting-list lengths. Every query is embedded for real with MiniLM, on both
sides. The baseline runs ``collection.query(n_results=10)`` on the very same Chroma
collection the recall uses, so the ratio isolates what hybrid recall adds.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import SyntheticEmbedder, open_bench_core, percentiles, print_table, stage
from memory_core.embedding.local import shared_minilm
from memory_core.vectors.chroma import ChromaVectorStore, collection_name

VOCAB = 20_000


class MixedEmbedder:
    """Synthetic vectors for bulk rows; the real model for queries (short texts)."""

    name = "synthetic rows + MiniLM queries"
    dimension = 384

    def __init__(self) -> None:
        self.bulk = True
        self._synthetic = SyntheticEmbedder()

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self._synthetic.embed(texts) if self.bulk else shared_minilm().embed(texts)

    def embed_query(self, texts: list[str]) -> list[list[float]]:
        """Recall's query path, as the real model serves it (the baseline keeps :meth:`embed`)."""
        return self._synthetic.embed(texts) if self.bulk else shared_minilm().embed_query(texts)


def zipf_words(rng: np.random.Generator, n: int) -> list[str]:
    ranks = np.minimum(rng.zipf(1.15, n), VOCAB)
    return [f"w{r}" for r in ranks]


def load(core: Any, start: int, stop: int, rng: np.random.Generator) -> None:
    for i in range(start, stop, 1000):
        core.add_memories([
            {"tenant": "bench", "session": f"s{j // 200}", "agent": f"agent{j % 5}",
             "content": f"Turn {j}: " + " ".join(zipf_words(rng, 20)),
             "timestamp": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(1_700_000_000 + j * 60))}+00:00"}
            for j in range(i, min(stop, i + 1000))
        ])


def chroma_of(core: Any) -> ChromaVectorStore:
    """The Chroma store under the deadline and lazy-open wrappers (the baseline queries it raw)."""
    store = core._vectors
    while not isinstance(store, ChromaVectorStore):
        store = store.inner if hasattr(store, "inner") else store.open()
    return store


def measure(core: Any, embedder: MixedEmbedder, queries: list[str]) -> dict[str, Any]:
    embedder.bulk = False
    collection = chroma_of(core)._client.get_collection(collection_name("mc", "bench"), embedding_function=None)
    ours, base = [], []
    for q in queries:  # interleaved, so noise hits both sides alike
        t = time.perf_counter()
        core.recall("bench", q, limit=10)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        collection.query(query_embeddings=embedder.embed([q]), n_results=10, include=["distances"])
        base.append(time.perf_counter() - t)
    embedder.bulk = True
    return {"recall": percentiles(ours), "baseline": percentiles(base)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rng = np.random.default_rng(7)
    queries = [" ".join(zipf_words(rng, 5)) for _ in range(args.queries)]
    shared_minilm().warm_up()
    results: dict[str, Any] = {"note": "rows: synthetic vectors + Zipf words; queries embedded with MiniLM"}
    embedder = MixedEmbedder()
    with tempfile.TemporaryDirectory(prefix="mc-recall-") as tmp:
        core = open_bench_core(Path(tmp), embedder)
        try:
            loaded = 0
            for n in sizes:  # grow one store: 1k, then to 10k, then to 100k
                with stage(f"load to {n} memories"):
                    load(core, loaded, n, np.random.default_rng(n))
                    loaded = n
                for q in queries[:5]:  # warm caches at this size
                    core.recall("bench", q)
                results[n] = measure(core, embedder, queries)
        finally:
            core.close()
    first = results[sizes[0]]["recall"]["p50_ms"]
    rows = []
    for n in sizes:
        r, b = results[n]["recall"], results[n]["baseline"]
        rows.append([n, r["p50_ms"], r["p95_ms"], b["p50_ms"], b["p95_ms"], round(r["p50_ms"] / b["p50_ms"], 2),
                     round(r["p50_ms"] / first, 2)])
    print_table("recall(limit=10) vs query embedding + raw Chroma query (same collection, same run)",
                ["memories", "recall p50 ms", "p95", "baseline p50 ms", "p95", "ratio (goal<=2)",
                 f"vs {sizes[0]} (goal<=3)"], rows)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
