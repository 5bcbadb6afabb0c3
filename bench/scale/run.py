"""Scale benchmark (issue 11 §2): cold open, resident memory, recall and paging at 100k-1M memories.

    python -m bench.scale.run [--sizes 100000,300000,1000000] [--layouts one-tenant,100-tenants]
                          [--quick] [--build-only] [--max-build-min M] [--cache-dir DIR] [--json PATH]

Stores are loaded through the write path (``MemoryCore.add_memories``) with synthetic vectors
(:mod:`bench.scale.data`: sessions of 20-200 turns, a mix of types, 5 agents a tenant, ~3 %
private rows), one tenant or spread over 100 tenants, and cached under ``--cache-dir``
(default ~/.cache/memory-core-bench/scale/<layout>-<size>/, marker file written last; a
half-built store is rebuilt). Before building, an ETA is printed from the load rate of the
layout's largest finished store (a 10k one is built first when there is none);
``--max-build-min`` skips stores whose ETA is longer.

Every store is then measured in a FRESH process (:mod:`bench.scale.probe`): cold open, RSS after
open and after a recall workload over (up to) 10 tenants, recall p50/p95 next to (query
embedding + raw Chroma query on the same collection) in the same process, and the
``query_recent_turns`` page p50 next to a 1k store's, measured in the same run.
``--quick`` is the smoke path: sizes 1k and 10k, fewer queries.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.common import print_table, stage
from bench.scale.data import DEFAULT_CACHE, LAYOUTS, BuildInProgress, Spec, build, finished, marker, store_dir
from memory_core.recall.stages import ORDER

ROOT = Path(__file__).resolve().parents[2]  # the checkout
RATE_PROBE = Spec("one-tenant", 10_000)
REFERENCE = Spec("one-tenant", 1_000)
WORKLOAD_TENANTS = 10
GOALS = {"cold_open_s": 1.0, "rss_after_open_mb_at_1m": 300, "recall_ratio": 2.0, "recall_vs_100k": 2.0,
         "page_vs_1k": 1.5}


def load_rate(cache: Path, spec: Spec) -> tuple[float, str]:
    """Rows/s of the write path for ``spec``'s layout: from the largest finished smaller store of that
    layout (the rate falls as a store grows), else from a 10k store built now."""
    built = [m for m in finished(cache) if m["layout"] == spec.layout and RATE_PROBE.size <= m["size"] < spec.size]
    if not built:
        with stage(f"load rate on {spec.layout}-{RATE_PROBE.size}"):
            built = [build(cache, Spec(spec.layout, RATE_PROBE.size))]
    best = max(built, key=lambda m: m["size"])
    return float(best["rows_per_s"]), f"{spec.layout}-{best['size']}"


def build_all(cache: Path, specs: list[Spec], max_min: float | None) -> list[Spec]:
    """Build the missing stores (smallest first, after printing their ETAs); returns those that exist."""
    etas: dict[Spec, float] = {}
    for s in specs:
        if marker(cache, s) is None and s.size > RATE_PROBE.size:
            rate, source = load_rate(cache, s)
            etas[s] = s.size / rate / 60
            print(f"  ETA {s.name}: ~{etas[s]:.1f} min at {rate:,.0f} rows/s (the rate of {source})", flush=True)
    ready = []
    for s in sorted(specs, key=lambda s: s.size):
        if marker(cache, s) is None:
            if max_min is not None and etas.get(s, 0.0) > max_min:
                print(f"  skipping {s.name}: ETA {etas[s]:.0f} min > --max-build-min {max_min:g}", flush=True)
                continue
            try:
                with stage(f"building {s.name} through the write path (synthetic vectors)"):
                    build(cache, s)
            except BuildInProgress as busy:
                print(f"  skipping {s.name}: {busy}", flush=True)
                continue
        ready.append(s)
    return ready


def run_probe(cache: Path, spec: Spec, queries: int, page_reps: int) -> dict[str, Any]:
    """The probe in a fresh interpreter, so open and RSS are a real cold start."""
    tenants = spec.tenants[:WORKLOAD_TENANTS]
    sessions = max(1, spec.size // len(spec.tenants) // 200)  # sessions are <= 200 turns: these all exist
    command = [sys.executable, "-m", "bench.scale.probe", str(store_dir(cache, spec)), "--tenants",
               ",".join(tenants), "--queries", str(queries), "--page-reps", str(page_reps),
               "--page-sessions", str(min(sessions, 8))]
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")} | {"PYTHONPATH": path}
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=3600)
    if out.returncode != 0:
        raise SystemExit(f"probe of {spec.name} failed:\n{out.stderr[-4000:]}")
    result = dict(json.loads(out.stdout.strip().splitlines()[-1]))
    result["store"] = marker(cache, spec)
    return result


def table(results: dict[str, Any], specs: list[Spec]) -> None:
    ref = results["reference_1k"]["recent_page"]["p50_ms"]
    rows = []
    for s in specs:
        r = results["runs"][s.name]
        smallest = min((o for o in specs if o.layout == s.layout), key=lambda o: o.size)
        first = results["runs"][smallest.name]["recall"]["p50_ms"]
        rows.append([
            s.layout, f"{s.size:,}", r["cold_open_s"], r["cold_open_cpu_s"], r["open_to_first_read_s"],
            r["rss_after_open_mb"],
            r["rss_after_recall_mb"], r["recall"]["p50_ms"], r["recall"]["p95_ms"], r["baseline"]["p50_ms"],
            round(r["recall"]["p50_ms"] / r["baseline"]["p50_ms"], 2), round(r["recall"]["p50_ms"] / first, 2),
            r["recent_page"]["p50_ms"], round(r["recent_page"]["p50_ms"] / ref, 2),
        ])
    smallest_size = min(s.size for s in specs)
    print_table(
        f"Scale (each row a fresh process; load {os.getloadavg()[0]:.1f}; recall over <= {WORKLOAD_TENANTS} tenants; "
        f"1k reference page p50 {ref} ms)",
        ["layout", "memories", "cold open s (<=1)", "CPU s", "open+1st read s", "RSS open MB (<=300 @1M)",
         "RSS recall MB*", "recall p50 ms", "p95", "embed+Chroma p50", "ratio (<=2)",
         f"vs {smallest_size:,} (1M<=2x 100k)", "recent page p50 ms", "vs 1k (<=1.5)"],
        rows,
    )
    print("* RSS after the recall workload includes the MiniLM query model "
          "(see rss_after_model_mb in the JSON); every store is loaded with synthetic vectors.")


def stage_table(results: dict[str, Any], specs: list[Spec]) -> None:
    """Where a recall's time goes in each store: the p50 of each stage (``diagnostics["stages_ms"]``)."""
    medians = {s.name: results["runs"][s.name].get("recall_stages_p50_ms", {}) for s in specs}
    names = [k for k in ORDER if any(k in m for m in medians.values())]
    print_table("Recall's stages, p50 ms (lexical and entities run beside embed and vector)",
                ["layout", "memories", *names],
                [[s.layout, f"{s.size:,}", *(medians[s.name].get(k, "") for k in names)] for s in specs])


def targets(results: dict[str, Any], specs: list[Spec]) -> list[dict[str, Any]]:
    """Issue 11 §2's targets per layout, judged at the largest size measured (1M in a full run)."""
    out = []
    ref = results["reference_1k"]["recent_page"]["p50_ms"]
    for layout in dict.fromkeys(s.layout for s in specs):
        runs = {s.size: results["runs"][s.name] for s in specs if s.layout == layout}
        top = max(runs)
        big = runs[top]
        found = [("cold open s, worst size", max(r["cold_open_s"] for r in runs.values()), GOALS["cold_open_s"]),
                 ("RSS after open MB", big["rss_after_open_mb"], GOALS["rss_after_open_mb_at_1m"]),
                 ("recall p50 / (embed + raw Chroma)", big["recall"]["p50_ms"] / big["baseline"]["p50_ms"],
                  GOALS["recall_ratio"]),
                 ("recent page p50 / 1k", big["recent_page"]["p50_ms"] / ref, GOALS["page_vs_1k"])]
        if 100_000 in runs and top > 100_000:
            found.append(("recall p50 / the 100k figure", big["recall"]["p50_ms"] / runs[100_000]["recall"]["p50_ms"],
                          GOALS["recall_vs_100k"]))
        out += [{"layout": layout, "at": top, "target": name, "value": round(value, 3), "goal": goal,
                 "ok": value <= goal} for name, value, goal in found]
    print_table("Targets of issue 11 §2, at the largest size measured (the goals are for 1M)",
                ["layout", "at", "target", "value", "goal <=", ""],
                [[t["layout"], f"{t['at']:,}", t["target"], t["value"], t["goal"], "ok" if t["ok"] else "OVER"]
                 for t in out])
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", help="comma-separated store sizes (default 100000,300000,1000000)")
    parser.add_argument("--layouts", default=",".join(LAYOUTS), help="one-tenant and/or 100-tenants")
    parser.add_argument("--quick", action="store_true", help="smoke: sizes 1000,10000, fewer queries")
    parser.add_argument("--queries", type=int, help="timed recalls per store (default 100, --quick 20)")
    parser.add_argument("--build-only", action="store_true", help="build the caches, measure nothing")
    parser.add_argument("--max-build-min", type=float, help="skip stores whose load ETA is longer")
    parser.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("1000,10000" if args.quick else "100000,300000,1000000")).split(",")]
    layouts = args.layouts.split(",")
    unknown = sorted(set(layouts) - set(LAYOUTS))
    if unknown:
        parser.error(f"unknown layout(s) {unknown}; choose from {sorted(LAYOUTS)}")
    queries = args.queries or (20 if args.quick else 100)
    page_reps = 60 if args.quick else 300
    cache = args.cache_dir.expanduser()
    wanted = [Spec(layout, n) for n in sorted(sizes) for layout in layouts]
    specs = [s for s in build_all(cache, list(dict.fromkeys([REFERENCE, *wanted])), args.max_build_min) if s in wanted]
    if args.build_only:
        return {}
    results: dict[str, Any] = {
        "note": "synthetic vectors + Zipf words through MemoryCore.add_memories; queries embedded with MiniLM; "
                "each store measured in a fresh process; ratios from the same process",
        "goals": GOALS, "machine": {"cpus": os.cpu_count(), "loadavg_1m": os.getloadavg()[0]},
        "commit": _commit(), "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "runs": {},
    }
    with stage(f"1k reference store ({REFERENCE.name}) in a fresh process"):
        results["reference_1k"] = run_probe(cache, REFERENCE, queries, page_reps)
    for s in specs:
        if s == REFERENCE:
            results["runs"][s.name] = results["reference_1k"]
            continue
        with stage(f"{s.name} in a fresh process"):
            results["runs"][s.name] = run_probe(cache, s, queries, page_reps)
    table(results, specs)
    stage_table(results, specs)
    results["targets"] = targets(results, specs)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=2))
    print(f"\nwrote {args.json}")
    return results


def _commit() -> str | None:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or None


if __name__ == "__main__":
    main()
