"""Questions that name a day, in a busy tenant: recall with and without the dated branch.

    python -m bench.quality.dated_recall [--data ../shared/data/locomo_dev.json]

Every LoCoMo conversation goes into one tenant (2,760 turns instead of ~550 a tenant), so the
vector and lexical pools hold a small share of it and a day the question names is a hint that
matters. Each question is recalled with the default preset and with the same preset less its
dated branch (``dated.pool = 0``), side by side in one store; the scores are reported for every
question and for those naming a day ("on 11 December, 2023"), with recall's p50 on the latter.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path

from bench.common import open_bench_core, percentiles, print_table, stage
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_embedder
from bench.quality.locomo import DEPTH, ingest
from bench.quality.metrics import Scoreboard
from memory_core.recall import presets

TENANT = "locomo"
NAMES_A_DAY = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:January|February|March|April|May|June|July"
                         r"|August|September|October|November|December)\b", re.I)
ARMS = {"without the dated branch": "bench-no-dated", "recall": "balanced"}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo_dev.json"))
    args = parser.parse_args(argv)
    presets.PRESETS["bench-no-dated"] = presets.PRESETS["balanced"].tuned({"dated.pool": 0})
    conversations = load_locomo(args.data)
    rows = []
    with tempfile.TemporaryDirectory(prefix="dated-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder("minilm"))
        try:
            ref_to_sid: dict[str, str] = {}
            with stage(f"ingest {sum(len(c.turns) for c in conversations)} turns into one tenant"):
                for conv in conversations:
                    one = dataclasses.replace(conv, turns=[dataclasses.replace(t, tenant=TENANT) for t in conv.turns])
                    ref_to_sid.update(ingest(core, one))
            for label, preset in ARMS.items():
                every, dated = Scoreboard(), Scoreboard()
                spent: list[float] = []
                for qa in (qa for conv in conversations for qa in conv.qa):
                    result = core.recall(TENANT, qa.question, limit=DEPTH, preset=preset)
                    ranked = [ref_to_sid.get(m.ref, "") for m in result.messages]
                    every.add(qa.category, ranked, qa.evidence)
                    if NAMES_A_DAY.search(qa.question):
                        dated.add(qa.category, ranked, qa.evidence)
                        spent.append(float(result.diagnostics["elapsed_ms"]) / 1000)
                a, d = every.summary()["micro"], dated.summary()["micro"]
                rows.append([label, f"{a['any@5']:.3f}", f"{a['frac@10']:.3f}", int(d["n"]), f"{d['any@5']:.3f}",
                             f"{d['frac@10']:.3f}", f"{d['mrr@20']:.3f}", f"{percentiles(spent)['p50_ms']:.1f}"])
        finally:
            core.close()
    print_table("LoCoMo dev, every conversation in one tenant", ["method", "all any@5", "all frac@10", "naming a day",
                "any@5", "frac@10", "MRR@20", "p50 ms"], rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
