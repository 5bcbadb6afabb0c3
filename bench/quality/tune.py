"""Evaluate recall config variants side by side on every workload, ingesting once.

    python -m bench.quality.tune '{"gate.quality": 0}' '{"lexical.window": 0.4}' [--base balanced] [--only madial]

Each argument is a JSON object of :class:`RecallConfig` overrides on the base preset, each named
``group.field`` (:meth:`RecallConfig.tuned`); the
first row is the base preset itself. LoCoMo reports any@5/frac@10/MRR@20 overall and per
conversation, and any@5/any@10/MRR@20 of the adversarial category (5, apart: never in the other
figures); MADial hit@5/any@5/MRR@10 for recall and recall_with_context. A tool for
choosing weights by numbers — its choices are then checked leave-one-conversation-out.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.locomo import ADVERSARIAL, load_locomo
from bench.latency.embed_cache import cached_embedder
from bench.quality import coding, madial
from bench.quality.locomo import DEPTH, ingest
from bench.quality.metrics import Scoreboard
from memory_core.recall import presets


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("variants", nargs="*")
    parser.add_argument("--base", default="balanced")
    parser.add_argument("--only", default="madial,locomo,coding")
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--madial", type=Path, default=Path("../shared/data/madial"))
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model> (of fastembed's catalogue)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    variants: list[tuple[str, dict[str, Any]]] = [("base", {})]
    variants += [(v, json.loads(v)) for v in args.variants]
    for i, (_label, over) in enumerate(variants):
        presets.PRESETS[f"tune{i}"] = presets.PRESETS[args.base].tuned(over)
    rows: list[list[Any]] = []
    per_conv: dict[str, list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="tune-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(args.embedder))
        try:
            with stage("ingest"):
                convs = load_locomo(args.locomo) if "locomo" in only else []
                maps = [ingest(core, c) for c in convs]
                mad = madial.ingest(core, args.madial, own_sessions=False) if "madial" in only else None
                cod = coding.ingest(core) if "coding" in only else None
            for i, (label, _over) in enumerate(variants):
                row: list[Any] = [label[:60]]
                if convs:
                    total = Scoreboard()
                    per = []
                    for conv, ref_to_sid in zip(convs, maps, strict=True):
                        board = Scoreboard()
                        for qa in [*conv.qa, *conv.adversarial]:
                            res = core.recall(qa.tenant, qa.question, limit=DEPTH, preset=f"tune{i}")
                            ranked = [ref_to_sid.get(m.ref, "") for m in res.messages]
                            board.add(qa.category, ranked, qa.evidence)
                            total.add(qa.category, ranked, qa.evidence)
                        micro = board.summary()["micro"]
                        per.append(micro["any@5"])
                        per_conv.setdefault(label, []).append((micro["n"], micro["any@5"], micro["frac@10"]))
                    summary = total.summary()
                    m, adv = summary["micro"], summary.get(f"cat{ADVERSARIAL}", {})
                    row += [m["any@5"], m["frac@10"], m["mrr@20"], " ".join(f"{x:.2f}" for x in per),
                            *(adv.get(k, 0.0) for k in ("any@5", "any@10", "mrr@20"))]
                if mad is not None:
                    for with_context in (False, True):
                        s = madial.score(core, mad, {"preset": f"tune{i}"}, with_context)
                        row += [s["hit@5"], s["any@5"], s["mrr@10"]]
                if cod is not None:
                    s = coding.score(core, cod, {"preset": f"tune{i}"})
                    row += [s["hit@5"], s["mrr@10"]]
                rows.append(row)
                print(row, flush=True)
        finally:
            core.close()
    header = ["variant"]
    if "locomo" in only:
        header += ["L any@5", "L frac@10", "L mrr", "L per conv any@5", "L5 any@5", "L5 any@10", "L5 mrr"]
    if "madial" in only:
        header += ["M hit@5", "M any@5", "M mrr", "Mc hit@5", "Mc any@5", "Mc mrr"]
    if "coding" in only:
        header += ["C hit@5", "C mrr"]
    print_table("variants", header, rows)
    if len(per_conv) > 1:
        loco(per_conv)


def loco(per_conv: dict[str, list[tuple[float, float, float]]]) -> None:
    """Leave-one-conversation-out: for each conversation, the variant best on the others
    (question-weighted any@5) is scored on the one left out."""
    labels = list(per_conv)
    n_conv = len(next(iter(per_conv.values())))
    n_total = a_total = f_total = 0.0
    picks = []
    for held in range(n_conv):
        def others(label: str, held: int = held) -> float:
            rows = [r for j, r in enumerate(per_conv[label]) if j != held]
            return sum(n * a for n, a, _f in rows) / sum(n for n, _a, _f in rows)
        best = max(labels, key=others)
        n, a, f = per_conv[best][held]
        picks.append(best[:40])
        n_total, a_total, f_total = n_total + n, a_total + n * a, f_total + n * f
    print(f"\nLOCO over {len(labels)} variants: any@5 {a_total / n_total:.4f}, frac@10 {f_total / n_total:.4f}")
    print("  picked per held-out conversation:", picks)


if __name__ == "__main__":
    main()
