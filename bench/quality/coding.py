"""A coding agent's memory (``bench.data.coding``) recalled through ``MemoryCore.recall``.

    python -m bench.quality.coding [--preset NAME] [--json PATH]

Raw vector search and plain BM25 over the same memories run next to it; hit@k of the
target, any@5 of any relevant memory and MRR@10, overall and per query kind.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.coding import Workload, generate
from bench.latency.embed_cache import cached_embedder
from bench.quality.ranking import Bm25Baseline, HitBoard, vector_rank
from memory_core import MemoryCore

TENANT = "coding"
DEPTH = 10


@dataclass
class Loaded:
    workload: Workload
    ref_to_key: dict[str, str]
    bm25: Bm25Baseline


def ingest(core: MemoryCore) -> Loaded:
    w = generate()
    results = core.add_memories([
        {"tenant": TENANT, "session": m.session, "agent": m.agent, "content": m.content, "type": m.type,
         "timestamp": m.timestamp, **({"role": m.role} if m.role else {})} for m in w.memories])
    # a memory write-time hygiene left out (an agent's repeat, an acknowledgement) maps no ref
    ref_to_key = {r.ref: m.key for r, m in zip(results, w.memories, strict=True) if r.stored and r.ref}
    return Loaded(w, ref_to_key, Bm25Baseline([(m.key, m.content) for m in w.memories]))


def score(core: MemoryCore, data: Loaded, options: dict[str, Any], by_kind: dict[str, HitBoard] | None = None
          ) -> dict[str, float]:
    board = HitBoard()
    for q in data.workload.queries:
        res = core.recall(TENANT, q.text, limit=DEPTH, **options)
        ranked = [data.ref_to_key[m.ref] for m in res.messages]
        board.add(ranked, q.target, q.relevant)
        if by_kind is not None:
            by_kind.setdefault(q.kind, HitBoard()).add(ranked, q.target, q.relevant)
    return board.summary()


def run(preset: str | None, embedder: str = "minilm") -> dict[str, Any]:
    options = {"preset": preset} if preset else {}
    with tempfile.TemporaryDirectory(prefix="coding-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(embedder))
        try:
            with stage("ingest and score"):
                data = ingest(core)
                vector, bm25 = HitBoard(), HitBoard()
                for q in data.workload.queries:
                    vector.add(vector_rank(core, TENANT, q.text, data.ref_to_key, DEPTH), q.target, q.relevant)
                    bm25.add(data.bm25.rank(q.text, DEPTH), q.target, q.relevant)
                kinds: dict[str, HitBoard] = {}
                methods = {"raw vector": vector.summary(), "bm25": bm25.summary(),
                           "recall": score(core, data, options, kinds)}
        finally:
            core.close()
    return {"memories": len(data.workload.memories), "queries": len(data.workload.queries), "methods": methods,
            "recall_by_kind": {k: b.summary() for k, b in sorted(kinds.items())}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model> (of fastembed's catalogue)")
    args = parser.parse_args(argv)
    result = run(args.preset, args.embedder)
    metrics = [m for m in next(iter(result["methods"].values())) if m != "n"]
    print_table(f"coding-agent memory — {result['queries']} queries, {result['memories']} memories",
                ["method", *metrics], [[n, *(f"{s[m]:.3f}" for m in metrics)] for n, s in result["methods"].items()])
    print_table("recall by query kind", ["kind", "n", *metrics],
                [[k, int(s["n"]), *(f"{s[m]:.3f}" for m in metrics)] for k, s in result["recall_by_kind"].items()])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
