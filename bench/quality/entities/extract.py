"""What the entity extractor costs per memory, next to embedding the same memory with MiniLM.

    python -m bench.quality.entities.extract [--data ../shared/data/locomo_dev.json] [--rows 512]

The texts: LoCoMo dev turns ("speaker: text") and the coding workload's memories (errors,
paths, identifiers). Both sides run in this process on the same texts: ``extract_entities``
one text at a time, and MiniLM ``embed`` in batches of 32 (as ``add_memories`` does);
the ratio is the extractor's share of the embedding cost. Also the entities found per text.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from bench.common import print_table
from bench.data.coding import generate
from bench.data.locomo import load_locomo
from memory_core.embedding.local import shared_minilm
from memory_core.entities.extract import extract_entities

BATCH = 32


def per_text_us(texts: Sequence[str], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        for t in texts:
            extract_entities(t)
        best = min(best, (time.perf_counter() - started) / len(texts))
    return best * 1e6


def embed_us(texts: Sequence[str]) -> float:
    model = shared_minilm()
    model.embed(list(texts[:BATCH]))  # warm
    started = time.perf_counter()
    for i in range(0, len(texts), BATCH):
        model.embed(list(texts[i:i + BATCH]))
    return (time.perf_counter() - started) / len(texts) * 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--rows", type=int, default=512, help="texts per workload embedded with MiniLM")
    args = parser.parse_args(argv)
    workloads = {
        "LoCoMo turns": [t.content for c in load_locomo(args.data) for t in c.turns],
        "coding memories": [m.content for m in generate().memories],
    }
    rows = []
    for name, texts in workloads.items():
        sample = texts[: args.rows]
        ext = per_text_us(texts)
        emb = embed_us(sample)
        found = statistics.fmean(len(extract_entities(t)) for t in texts)
        chars = statistics.fmean(len(t) for t in texts)
        rows.append([name, len(texts), f"{chars:.0f}", f"{found:.1f}", f"{ext:.1f}", f"{emb:.0f}",
                     f"{100 * ext / emb:.2f}%"])
    print_table("extract_entities vs MiniLM embedding, per memory (same process, same texts)",
                ["texts", "n", "mean chars", "entities/text", "extract µs", "embed µs", "extract/embed"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
