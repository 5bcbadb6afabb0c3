"""How often the three workloads repeat a fact, by each definition of "the same fact" considered.

    python -m bench.quality.repeats [--locomo ../shared/data/locomo_dev.json] [--madial ../shared/data/madial]

For LoCoMo (per conversation), MADial (its memory bank) and the coding set (``bench.data.coding``),
counts the pairs of memories that would collapse into one recall row:

- ``stored_hash``: equal ``content_hash`` (whitespace collapsed, case folded);
- ``fact_key``: equal :func:`memory_core.recall.collapse.fact_key` (also punctuation at word
  ends, question marks kept) — what recall collapses;
- ``words``: the same sequence of ``\\w+`` words (all punctuation ignored);
- ``jaccard>=t``: word sets overlapping by at least ``t`` (order ignored), for t = 0.9, 0.8, 0.7;

and prints a few pairs of each near-duplicate kind, to read whether they state one fact or two.
No store is opened: this reads the texts only.
"""

from __future__ import annotations

import argparse
import itertools
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from bench.data.coding import generate
from bench.data.locomo import load_locomo
from bench.quality import madial
from memory_core.recall.collapse import fact_key
from memory_core.write.rows import content_hash

WORD = re.compile(r"\w+")
THRESHOLDS = (0.9, 0.8, 0.7)
SAMPLES = 3


def pairs(counter: Counter[str]) -> int:
    """Pairs of items sharing a key: n copies make n·(n-1)/2."""
    return sum(n * (n - 1) // 2 for n in counter.values())


def analyse(groups: Sequence[Sequence[str]]) -> tuple[dict[str, int], dict[str, list[tuple[float, str, str]]]]:
    """Counts of collapsing pairs per definition, within each group (a tenant), and sample pairs."""
    counts: Counter[str] = Counter()
    samples: dict[str, list[tuple[float, str, str]]] = {}
    for texts in groups:
        counts["rows"] += len(texts)
        counts["stored_hash"] += pairs(Counter(content_hash(t) for t in texts))
        counts["fact_key"] += pairs(Counter(fact_key(t) for t in texts))
        counts["words"] += pairs(Counter(" ".join(WORD.findall(t.casefold())) for t in texts))
        sets = [frozenset(WORD.findall(t.casefold())) for t in texts]
        for i, j in itertools.combinations(range(len(texts)), 2):
            if not sets[i] or not sets[j]:
                continue
            jaccard = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            for t in THRESHOLDS:
                if jaccard >= t:
                    counts[f"jaccard>={t}"] += 1
            band = next((f"jaccard>={t}" for t in THRESHOLDS if jaccard >= t), None)
            if band is not None and fact_key(texts[i]) != fact_key(texts[j]):
                kept = samples.setdefault(band, [])
                if len(kept) < SAMPLES:
                    kept.append((round(jaccard, 2), texts[i][:100], texts[j][:100]))
    return dict(counts), samples


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--madial", type=Path, default=Path("../shared/data/madial"))
    args = parser.parse_args(argv)
    workloads = {
        "locomo": [[t.content for t in conv.turns] for conv in load_locomo(args.locomo)],
        "madial": [[str(memory["event"]) for _key, memory in madial.load_memories(args.madial)]],
        "coding": [[m.content for m in generate().memories]],
    }
    for name, groups in workloads.items():
        counts, samples = analyse(groups)
        print(f"{name}: {counts}")
        for band, kept in samples.items():
            for jaccard, a, b in kept:
                print(f"  {band} ({jaccard}): {a!r} | {b!r}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
