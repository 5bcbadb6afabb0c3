"""bench.latency.fleet's reduced run (hash embedder, 1 and 2 writers, short phases) reports every figure on
both paths, so the benchmark cannot rot between the runs made by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.latency.fleet import main

LATENCY = {"p50_ms", "p95_ms", "n"}


@pytest.mark.slow
def test_a_reduced_fleet_run_reports_every_figure_for_both_paths_and_modes(tmp_path: Path) -> None:
    out = tmp_path / "fleet.json"
    main(["--embedder", "hash", "--writers", "1,8", "--seconds", "0.5", "--preload", "20", "--blocks", "1",
          "--block-seconds", "0.3", "--raw-rows", "32", "--json", str(out)])
    results = json.loads(out.read_text())
    assert set(results["paths"]) == {"mcp", "library"}
    assert set(results["lone_overhead"]["us_per_add"]) == {"on", "off"}
    for name, path in results["paths"].items():
        assert len(path["raw_rounds"]) == 3 and all(r > 0 for r in path["raw_rounds"])  # first, then one a count
        for figure in ("idle_recall", "lone_add"):
            assert set(path[figure]) == {"on", "off"} and all(set(v) == LATENCY for v in path[figure].values())
        for mode in ("on", "off"):
            assert set(path["fleet"][mode]) == {"1", "8"}, name
            for row in path["fleet"][mode].values():
                assert row["rows_per_s"] > 0 and set(row["add"]) == LATENCY and set(row["recall"]) == LATENCY
                assert row["raw_rows_per_s"] > 0 and row["vs_raw"] > 0
        assert "mean_batch" in path["fleet"]["on"]["8"] and "mean_batch" not in path["fleet"]["off"]["8"], name
    assert {(g["path"], g["goal"]) for g in results["goals"]} == {
        (p, g) for p in ("mcp", "library") for g in ("throughput_8_vs_raw_batch32", "add_p95_8_vs_lone_p50",
                                                     "recall_p95_8_vs_idle_p50", "lone_add_p50_on_vs_off")}
