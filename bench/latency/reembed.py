"""Re-embedding in place against a plain batch add of the same rows, in rows per second.

    python -m bench.latency.reembed [--rows 2000] [--model minilm] [--json PATH]

The rows are LoCoMo dev's turns (``../shared/data/locomo_dev.json``) when present, else the coding set,
cycled to ``--rows``. Both sides embed with the same real model, uncached (the default MiniLM, or
``fastembed:<model>``), on embedded Chroma and SQLite, in this one run:

- ``batch add``: ``core.add_memories`` of every row, 256 at a time, into an empty store;
- ``reembed``: a store holding the same rows under the hash embedder, re-embedded with the model by
  :func:`memory_core.operator.reembed` (the new index built beside the old, then the switch; the old
  index's drop included).

Goal (issue 50): reembed at least 0.8x the batch add's rows per second.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.coding import generate
from bench.data.locomo import load_locomo
from memory_core import AddItem, HashEmbedder, shared_minilm
from memory_core.embedding.api import Embedder
from memory_core.operator import reembed

LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo_dev.json"
BATCH = 256


def rows(n: int) -> list[AddItem]:
    if LOCOMO.exists():
        base: list[AddItem] = [
            {"tenant": t.tenant, "session": t.session, "agent": t.agent, "content": t.content,
             "timestamp": t.timestamp, "type": "turn"} for c in load_locomo(LOCOMO) for t in c.turns]
    else:
        base = [{"tenant": "coding", "session": m.session, "agent": m.agent, "content": m.content, "type": m.type,
                 "timestamp": m.timestamp} for m in generate().memories]
    return [{**base[i % len(base)], "content": f"{base[i % len(base)]['content']}" + (
        f" ({i // len(base)})" if i >= len(base) else "")} for i in range(n)]


def model(name: str) -> Embedder:
    if name.startswith("fastembed:"):
        from memory_core.embedding.local import shared_fastembed

        return shared_fastembed(name.split(":", 1)[1])
    return shared_minilm()


def add_all(core: Any, items: Sequence[AddItem]) -> None:
    for start in range(0, len(items), BATCH):
        core.add_memories(list(items[start:start + BATCH]))


def run(n: int, model_name: str) -> dict[str, Any]:
    items = rows(n)
    embedder = model(model_name)
    embedder.embed(["warm up the model once, outside both timings"])
    with tempfile.TemporaryDirectory(prefix="reembed-bench-") as tmp:
        with stage(f"batch add of {n} rows with {model_name}"):
            core = open_bench_core(Path(tmp) / "add", embedder)
            try:
                start = time.perf_counter()
                add_all(core, items)
                add_s = time.perf_counter() - start
            finally:
                core.close()
        with stage(f"reembed of {n} rows from the hash embedder to {model_name}"):
            core = open_bench_core(Path(tmp) / "re", HashEmbedder())
            try:
                add_all(core, items)
                start = time.perf_counter()
                report = reembed(core.operator_parts(), embedder)
                re_s = time.perf_counter() - start
            finally:
                core.close()
    assert report.switched and sum(report.embedded.values()) == n
    add_rate, re_rate = n / add_s, n / re_s
    return {"rows": n, "model": model_name, "batch_add": {"seconds": round(add_s, 2), "rows_per_s": round(add_rate, 1)},
            "reembed": {"seconds": round(re_s, 2), "rows_per_s": round(re_rate, 1)},
            "ratio": round(re_rate / add_rate, 2), "goal_0.8x": re_rate >= 0.8 * add_rate}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--model", default="minilm", help="minilm, or fastembed:<model>")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    result = run(args.rows, args.model)
    print_table(f"re-embed vs batch add — {result['rows']} rows, {result['model']}", ["method", "seconds", "rows/s"],
                [["batch add", result["batch_add"]["seconds"], result["batch_add"]["rows_per_s"]],
                 ["reembed", result["reembed"]["seconds"], result["reembed"]["rows_per_s"]]])
    goal = "met" if result["goal_0.8x"] else "MISSED"
    print(f"\nratio reembed / batch add: {result['ratio']}x (goal >= 0.8x: {goal})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
