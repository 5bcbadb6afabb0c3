"""bench.scale.run's quick path builds its stores through the write path and reports every figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.scale.data import MARKER, BuildInProgress, Spec, build, build_lock, marker, rows_of
from bench.scale.run import load_rate, main

PROBE_FIELDS = {
    "tenants_probed", "loadavg_1m", "rss_after_imports_mb", "cold_open_s", "cold_open_cpu_s", "rss_after_open_mb",
    "first_read_s", "open_to_first_read_s", "recent_page", "rss_after_model_mb", "first_recall_s", "first_recalls",
    "recall", "baseline", "rss_after_recall_mb", "rss_peak_mb", "store", "recall_stages_p50_ms",
    "baseline_parts_p50_ms",
}
LATENCY_FIELDS = {"p50_ms", "p95_ms", "n"}


@pytest.mark.slow
def test_the_quick_run_on_1k_writes_every_figure_for_both_layouts(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    main(["--quick", "--sizes", "1000", "--queries", "10", "--cache-dir", str(tmp_path / "cache"),
          "--json", str(out)])
    results = json.loads(out.read_text())
    assert set(results["runs"]) == {"one-tenant-1000", "100-tenants-1000"}
    for name, run in [*results["runs"].items(), ("reference_1k", results["reference_1k"])]:
        assert set(run) >= PROBE_FIELDS, (name, PROBE_FIELDS - set(run))
        for part in ("recent_page", "recall", "baseline", "first_recalls"):
            assert set(run[part]) == LATENCY_FIELDS, (name, part)
        assert run["recall"]["n"] == 10 and run["cold_open_s"] > 0 and run["rss_after_open_mb"] > 0
        assert {"embed", "vector", "lexical", "rank"} <= set(run["recall_stages_p50_ms"]), name
    assert results["runs"]["100-tenants-1000"]["tenants_probed"] == 10
    assert results["runs"]["100-tenants-1000"]["store"]["tenants"] == 100
    assert {(t["layout"], t["target"]) for t in results["targets"]} >= {
        (layout, "cold open s, worst size") for layout in ("one-tenant", "100-tenants")}


def test_a_store_without_its_marker_is_rebuilt_from_scratch(tmp_path: Path) -> None:
    spec = Spec("one-tenant", 100)
    half = tmp_path / spec.name / "store"
    half.mkdir(parents=True)
    (half / "leftover").write_text("a load that was killed")
    assert marker(tmp_path, spec) is None
    done = build(tmp_path, spec)
    assert not (half / "leftover").exists()
    assert (tmp_path / spec.name / MARKER).is_file() and done["size"] == 100


def test_generated_rows_span_sessions_types_agents_and_private_rows() -> None:
    rows = [r for batch in rows_of(Spec("one-tenant", 3000)) for r in batch]
    assert len(rows) == 3000
    sessions: dict[str, int] = {}
    for r in rows:
        sessions[r["session"]] = sessions.get(r["session"], 0) + 1
    assert all(n <= 200 for n in sessions.values()) and len(sessions) >= 15
    assert {r["type"] for r in rows} > {"turn", "note", "decision"}
    assert len({r["agent"] for r in rows}) == 5
    assert 0 < sum(r["visibility"] == "agent" for r in rows) < 300
    assert [r["timestamp"] for r in rows] == sorted(r["timestamp"] for r in rows)


def test_the_load_eta_uses_the_rate_of_the_layouts_largest_smaller_finished_store(tmp_path: Path) -> None:
    for layout, size, rate in [("one-tenant", 10_000, 900.0), ("one-tenant", 100_000, 500.0),
                               ("one-tenant", 300_000, 400.0), ("100-tenants", 100_000, 1100.0)]:
        (tmp_path / f"{layout}-{size}").mkdir()
        (tmp_path / f"{layout}-{size}" / MARKER).write_text(json.dumps({"layout": layout, "size": size,
                                                                         "rows_per_s": rate}))
    assert load_rate(tmp_path, Spec("one-tenant", 300_000)) == (500.0, "one-tenant-100000")
    assert load_rate(tmp_path, Spec("100-tenants", 1_000_000)) == (1100.0, "100-tenants-100000")


def test_a_store_another_process_is_building_is_left_alone(tmp_path: Path) -> None:
    spec = Spec("one-tenant", 100)
    loading = tmp_path / spec.name / "store"
    loading.mkdir(parents=True)
    with build_lock(tmp_path, spec), pytest.raises(BuildInProgress):
        build(tmp_path, spec)
    assert loading.is_dir() and marker(tmp_path, spec) is None
