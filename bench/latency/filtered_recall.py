"""Filtered recall vs unfiltered recall vs raw Chroma queries, at 10k and 100k memories.

    python -m bench.latency.filtered_recall [--sizes 10000,100000] [--queries 30] [--json PATH]

One tenant grown through the real write path (synthetic vectors, Zipf words as in
bench.latency.recall): sessions of 200 rows in 4 channels, 5 agents, every 7th row a
``note``, every 500th a ``decision`` (the rare type). Queries are embedded with MiniLM.
Each recall reports which vector path served it (memory_core.recall.branches.vector:
``overfetch``: unfiltered then post-filtered on the graph; ``ids``: over the rows the graph
lists, scored exactly in numpy when few; ``where``: Chroma's metadata-filtered scan, which
the "forced where" row takes, as every filtered recall did before). The raw Chroma rows
query the same collection the recall uses: unfiltered, with the filter pushed down as
``where``, with Chroma's own ``ids=`` search, and unfiltered over-fetching 8 pools.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import open_bench_core, percentiles, print_table, stage
from bench.latency.recall import MixedEmbedder, chroma_of, zipf_words
from memory_core.embedding.local import shared_minilm
from memory_core.recall.branches import vector as vector_branch
from memory_core.recall.filters import RecallFilters, resolve_project
from memory_core.vectors.chroma import collection_name

POOL = 80  # the recall's vector pool at limit 10
OLD = "type=decision, forced where (old path)"


def kind(j: int) -> str:
    return "decision" if j % 500 == 0 else "note" if j % 7 == 0 else "turn"


def load(core: Any, start: int, stop: int, rng: np.random.Generator) -> None:
    for i in range(start, stop, 1000):
        core.add_memories([
            {"tenant": "bench", "session": f"s{j // 200}", "agent": f"agent{j % 5}", "type": kind(j),
             "channel": f"c{(j // 200) % 4}", "content": f"Row {j}: " + " ".join(zipf_words(rng, 20)),
             "timestamp": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(1_700_000_000 + j * 60))}+00:00"}
            for j in range(i, min(stop, i + 1000))
        ])


def cases(n: int) -> dict[str, dict[str, str]]:
    return {
        "unfiltered": {},
        "type=decision (0.2%)": {"type": "decision"},
        "type=note (14%)": {"type": "note"},
        "type=turn (86%)": {"type": "turn"},
        "session (200 rows)": {"session": f"s{n // 400}"},
        "channel (25%)": {"channel": "c1"},
        "agent (20%)": {"agent": "agent2"},
        "project=X (global pool)": {"project_id": "X"},
    }


@contextlib.contextmanager
def forced_where() -> Iterator[None]:
    saved = vector_branch.OVERFETCH_MAX, vector_branch.IDS_MAX
    vector_branch.OVERFETCH_MAX, vector_branch.IDS_MAX = 0, 0
    try:
        yield
    finally:
        vector_branch.OVERFETCH_MAX, vector_branch.IDS_MAX = saved


def measure(core: Any, embedder: MixedEmbedder, queries: list[str], n: int) -> dict[str, Any]:
    embedder.bulk = False
    col = chroma_of(core)._client.get_collection(collection_name("mc", "bench"), embedding_function=None)
    rare = [f"mem:{i}" for i in set(core._graph.field_ids("bench", "type", "decision", None))]
    notes = [f"mem:{i}" for i in set(core._graph.field_ids("bench", "type", "note", None))]

    def where(t: str) -> Any:
        return RecallFilters.build("bench", None, resolve_project(None, None, {}), type=t).chroma_where()

    samples: dict[str, list[float]] = {}
    paths: dict[str, Counter[str]] = {}
    raw = {
        "unfiltered, n=80": {"n_results": POOL},
        "where type=decision, n=80 (old path)": {"n_results": POOL, "where": where("decision")},
        "where {type: decision} alone, n=80": {"n_results": POOL, "where": {"type": "decision"}},
        "Chroma ids= the decision rows (0.2%), n=80": {"n_results": POOL, "ids": rare},
        "where type=note, n=80 (old path)": {"n_results": POOL, "where": where("note")},
        "Chroma ids= the note rows (14%), n=80": {"n_results": POOL, "ids": notes},
        "unfiltered, n=640 (over-fetch)": {"n_results": POOL * 8},
    }
    for q in queries:  # interleaved, so noise hits every case alike
        for name, kwargs in cases(n).items():
            t = time.perf_counter()
            result = core.recall("bench", q, limit=10, **kwargs)
            samples.setdefault(f"recall {name}", []).append(time.perf_counter() - t)
            paths.setdefault(name, Counter())[result.diagnostics.get("vector_path", "?")] += 1
        with forced_where():  # the path every filtered recall took before the vector branch
            t = time.perf_counter()
            result = core.recall("bench", q, limit=10, type="decision")
            samples.setdefault(f"recall {OLD}", []).append(time.perf_counter() - t)
            paths.setdefault(OLD, Counter())[result.diagnostics.get("vector_path", "?")] += 1
        for name, kwargs in raw.items():
            t = time.perf_counter()
            col.query(query_embeddings=embedder.embed([q]), include=["distances"], **kwargs)
            samples.setdefault(f"embed + Chroma {name}", []).append(time.perf_counter() - t)
    embedder.bulk = True
    out: dict[str, Any] = {name: percentiles(s) for name, s in samples.items()}
    out["paths"] = {name: dict(c) for name, c in paths.items()}
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rng = np.random.default_rng(11)
    queries = [" ".join(zipf_words(rng, 5)) for _ in range(args.queries)]
    shared_minilm().embed(["warm up"])
    results: dict[int, Any] = {}
    embedder = MixedEmbedder()
    with tempfile.TemporaryDirectory(prefix="mc-filtered-") as tmp:
        core = open_bench_core(Path(tmp), embedder)
        try:
            loaded = 0
            for n in sizes:
                with stage(f"load to {n} memories"):
                    load(core, loaded, n, np.random.default_rng(n))
                    loaded = n
                for q in queries[:3]:
                    for kwargs in cases(n).values():
                        core.recall("bench", q, **kwargs)
                results[n] = measure(core, embedder, queries, n)
        finally:
            core.close()
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in results.items()}, indent=2))
    names = [k for k in results[sizes[0]] if k != "paths"]
    unfiltered = {n: results[n]["recall unfiltered"]["p50_ms"] for n in sizes}
    rows = []
    for name in names:
        row: list[Any] = [name]
        for n in sizes:
            p50 = results[n][name]["p50_ms"]
            case = name.removeprefix("recall ")
            path = ",".join(sorted(results[n]["paths"].get(case, {}))) if name.startswith("recall ") else "-"
            row += [round(p50, 1), round(results[n][name]["p95_ms"], 1), round(p50 / unfiltered[n], 2), path]
        rows.append(row)
    header = ["case"]
    for n in sizes:
        header += [f"{n:,} p50 ms", "p95", "x unfiltered", "vector path"]
    print_table("recall(limit=10) under filters vs unfiltered vs raw Chroma (same collection, same run)",
                header, rows)
    return results


if __name__ == "__main__":
    main()
