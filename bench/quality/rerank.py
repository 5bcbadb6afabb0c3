"""The balanced-rerank preset next to balanced, side by side in one store: quality on the three
workloads, and what a recall costs.

    python -m bench.quality.rerank [--top 10,20] [--locomo PATH] [--madial DIR]

Every workload is ingested once (LoCoMo: a tenant per conversation). Each LoCoMo question is
recalled with every preset, the presets taking turns at going first, and each call is timed:
the p50 and p95 columns are those calls, so the presets share the machine's noise. MADial
(recall and recall_with_context) and the coding set are scored with every preset on the same
store. ``--top`` adds the preset with other head sizes (``rerank.top``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_minilm
from bench.quality import coding, madial
from bench.quality.locomo import DEPTH, ingest
from bench.quality.metrics import Scoreboard
from memory_core.recall import presets

RERANK = "balanced-rerank"


def _p(samples: list[float], q: float) -> float:
    return statistics.quantiles(samples, n=100)[int(q) - 1] * 1000 if len(samples) > 1 else samples[0] * 1000


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--madial", type=Path, default=Path("../shared/data/madial"))
    parser.add_argument("--top", default="", help="more head sizes to compare, e.g. 10,30")
    args = parser.parse_args(argv)
    names = ["balanced", RERANK]
    for n in (int(x) for x in args.top.split(",") if x):
        presets.PRESETS[f"{RERANK}-{n}"] = presets.PRESETS[RERANK].tuned({"rerank.top": n})
        names.append(f"{RERANK}-{n}")
    boards = {p: Scoreboard() for p in names}
    spent: dict[str, list[float]] = {p: [] for p in names}
    other: dict[str, dict[str, Any]] = {p: {} for p in names}
    with tempfile.TemporaryDirectory(prefix="rerank-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_minilm())
        try:
            core.recall("warm", "warm up the models", preset=RERANK)
            for conv in load_locomo(args.locomo):
                with stage(f"{conv.sample_id}: {len(conv.qa)} questions × {len(names)} presets"):
                    ref_to_sid = ingest(core, conv)
                    for i, qa in enumerate(conv.qa):
                        for p in names[i % len(names):] + names[:i % len(names)]:
                            start = time.perf_counter()
                            res = core.recall(qa.tenant, qa.question, limit=DEPTH, preset=p)
                            spent[p].append(time.perf_counter() - start)
                            boards[p].add(qa.category, [ref_to_sid.get(m.ref, "") for m in res.messages],
                                          qa.evidence)
            with stage("MADial and the coding set"):
                mad = madial.ingest(core, args.madial, own_sessions=False)
                cod = coding.ingest(core)
                for p in names:
                    other[p]["madial"] = madial.score(core, mad, {"preset": p}, False)
                    other[p]["madial+ctx"] = madial.score(core, mad, {"preset": p}, True)
                    other[p]["coding"] = coding.score(core, cod, {"preset": p})
        finally:
            core.close()
    rows = []
    for p in names:
        lo = boards[p].summary()["micro"]
        m, mc, c = other[p]["madial"], other[p]["madial+ctx"], other[p]["coding"]
        rows.append([p, f"{lo['any@5']:.3f}", f"{lo['frac@10']:.3f}", f"{lo['mrr@20']:.3f}",
                     f"{_p(spent[p], 50):.1f}", f"{_p(spent[p], 95):.1f}",
                     f"{m['hit@5']:.3f}", f"{m['mrr@10']:.3f}", f"{mc['hit@5']:.3f}", f"{mc['mrr@10']:.3f}",
                     f"{c['hit@1']:.3f}", f"{c['hit@5']:.3f}", f"{c['mrr@10']:.3f}"])
    print_table("balanced vs balanced-rerank, one store, LoCoMo calls alternating",
                ["preset", "L any@5", "L frac@10", "L MRR@20", "L p50 ms", "L p95 ms", "M hit@5", "M MRR",
                 "Mctx hit@5", "Mctx MRR", "C hit@1", "C hit@5", "C MRR"], rows)


if __name__ == "__main__":
    main()
