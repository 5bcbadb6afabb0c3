"""The entity branch of recall on and off, side by side on every workload, ingesting once.

    python -m bench.quality.entities.recall [--variants '{"entity.weight": 0.2}' ...]

Rows: ``off`` (the balanced preset without the entity branch: ``entity.weight = entity.hop = 0``),
``on`` (the balanced preset as shipped) and any extra variants (JSON overrides of the balanced
preset). LoCoMo dev: any@5 and frac@10 per category and micro, then leave-one-conversation-out
over the rows (``bench.quality.tune.loco``); MADial hit@5/any@5 (recall and recall_with_context);
bench.quality.coding hit@5 and MRR@10.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_minilm
from bench.quality import coding, madial
from bench.quality.locomo import DEPTH, ingest
from bench.quality.metrics import Scoreboard
from bench.quality.tune import loco
from memory_core.recall import presets

CATS = ("cat1", "cat2", "cat3", "cat4")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="*", default=[])
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--madial", type=Path, default=Path("../shared/data/madial"))
    args = parser.parse_args(argv)
    base = presets.PRESETS["balanced"]
    variants: list[tuple[str, dict[str, Any]]] = [("off", {"entity.weight": 0.0, "entity.hop": 0.0}), ("on", {})]
    variants += [(v, json.loads(v)) for v in args.variants]
    for i, (_label, over) in enumerate(variants):
        presets.PRESETS[f"entity{i}"] = base.tuned(over)
    rows: list[list[Any]] = []
    per_conv: dict[str, list[tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="entity-recall-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_minilm())
        try:
            with stage("ingest LoCoMo dev, MADial, coding"):
                convs = load_locomo(args.locomo)
                maps = [ingest(core, c) for c in convs]
                mad = madial.ingest(core, args.madial, own_sessions=False)
                cod = coding.ingest(core)
            for i, (label, _over) in enumerate(variants):
                total = Scoreboard()
                for conv, ref_to_sid in zip(convs, maps, strict=True):
                    board = Scoreboard()
                    for qa in conv.qa:
                        res = core.recall(qa.tenant, qa.question, limit=DEPTH, preset=f"entity{i}")
                        ranked = [ref_to_sid.get(m.ref, "") for m in res.messages]
                        board.add(qa.category, ranked, qa.evidence)
                        total.add(qa.category, ranked, qa.evidence)
                    micro = board.summary()["micro"]
                    per_conv.setdefault(label, []).append((micro["n"], micro["any@5"], micro["frac@10"]))
                s = total.summary()
                row: list[Any] = [label[:48]]
                for key in ("micro", *CATS):
                    row += [f"{s[key]['any@5']:.3f}", f"{s[key]['frac@10']:.3f}"]
                for with_context in (False, True):
                    m = madial.score(core, mad, {"preset": f"entity{i}"}, with_context)
                    row += [f"{m['hit@5']:.3f}", f"{m['any@5']:.3f}"]
                c = coding.score(core, cod, {"preset": f"entity{i}"})
                row += [f"{c['hit@5']:.3f}", f"{c['mrr@10']:.3f}"]
                rows.append(row)
                print(row, flush=True)
        finally:
            core.close()
    header = ["variant"]
    for key in ("L all", "L c1 multi", "L c2 temp", "L c3 open", "L c4 single"):
        header += [f"{key} a@5", "f@10"]
    header += ["M hit@5", "M any@5", "Mc hit@5", "Mc any@5", "C hit@5", "C mrr"]
    print_table("entity branch off / on", header, rows)
    loco(per_conv)


if __name__ == "__main__":
    main()
