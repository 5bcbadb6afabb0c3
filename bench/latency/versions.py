"""What corrections and locks cost, side by side in one run: add_memory vs update_memory vs
lock_memory latency (interleaved, so load hits all alike), and recall over a tenant whose every
fact has three versions (a third of its rows current) vs a tenant of as many rows without versions.

    python -m bench.latency.versions [--rows 2000] [--rounds 200] [--minilm] [--json PATH]

Embedded stores (SQLite + Chroma persistent). The hash embedder by default, so the numbers are
the stores' work; ``--minilm`` embeds with the local model as a server would.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, percentiles, print_table, sentence, stage, timed
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import HashEmbedder, shared_minilm


def load(core: Any, tenant: str, rows: int) -> list[str]:
    refs: list[str] = []
    for start in range(0, rows, 500):
        items = [{"tenant": tenant, "session": f"s{i // 100}", "agent": "bench", "type": "fact",
                  "content": sentence(i)} for i in range(start, min(rows, start + 500))]
        refs += [r.ref for r in core.add_memories(items)]
    return refs


def run(rows: int, rounds: int, embedder: Embedder) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        core = open_bench_core(Path(tmp) / "data", embedder)
        try:
            with stage(f"load 2 tenants x {rows} rows (one of them: facts corrected twice)"):
                plain = load(core, "plain", rows)
                versioned = load(core, "versioned", rows - 2 * (rows // 3))
                for n, ref in enumerate(versioned[: rows // 3]):
                    head = core.update_memory("versioned", ref, content=sentence(rows + n)).added.ref
                    core.update_memory("versioned", head, content=sentence(2 * rows + n))
            assert core._graph.count("plain") == core._graph.count("versioned") == rows
            add_s, update_s, lock_s = [], [], []
            with stage(f"{rounds} rounds of add / update / lock, interleaved"):
                for i in range(rounds):
                    dt, added = timed(lambda i=i: core.add_memory("w", "s", "bench", sentence(10 * rows + i)))
                    add_s.append(dt)
                    dt, _ = timed(lambda ref=added.ref, i=i: core.update_memory("w", ref, content=sentence(i)))
                    update_s.append(dt)
                    dt, _ = timed(lambda ref=plain[i % len(plain)]: core.lock_memory("plain", ref))
                    lock_s.append(dt)
                    core.unlock_memory("plain", plain[i % len(plain)])
            recall: dict[str, list[float]] = {"plain": [], "versioned": []}
            with stage(f"{rounds} recalls per tenant, interleaved"):
                for i in range(rounds):
                    query = sentence(i % rows, words=5)
                    for tenant in recall:
                        recall[tenant].append(timed(lambda t=tenant, q=query: core.recall(t, q))[0])
        finally:
            core.close()
    out = {"add_memory": percentiles(add_s), "update_memory": percentiles(update_s),
           "lock_memory": percentiles(lock_s), "recall_plain": percentiles(recall["plain"]),
           "recall_versioned": percentiles(recall["versioned"])}
    out["update_over_add_p50"] = round(out["update_memory"]["p50_ms"] / out["add_memory"]["p50_ms"], 2)
    out["recall_versioned_over_plain_p50"] = round(
        out["recall_versioned"]["p50_ms"] / out["recall_plain"]["p50_ms"], 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--minilm", action="store_true", help="embed with the local MiniLM model")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    embedder: Embedder = shared_minilm() if args.minilm else HashEmbedder()
    result = run(args.rows, args.rounds, embedder)
    print_table("versions: latency (ms)", ["call", "p50", "p95", "n"],
                [[k, v["p50_ms"], v["p95_ms"], v["n"]] for k, v in result.items() if isinstance(v, dict)])
    print(f"\nupdate/add p50: {result['update_over_add_p50']}x · recall versioned/plain p50: "
          f"{result['recall_versioned_over_plain_p50']}x")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
