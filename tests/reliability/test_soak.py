"""Two minutes of the soak (bench/soak): 32 writers and 8 recallers over HTTP, the server SIGKILLed twice.

``make soak`` runs it for 30 minutes on each graph backend with the real MiniLM model; here it runs on
SQLite with the HashEmbedder, so that it fits ``make test``. Every acknowledged add must be in the store
exactly once with its content, doctor must find nothing, no recall may return another tenant's row, and
the server's open descriptors must not grow within a life.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak.run import SoakConfig, run_soak


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_minutes_of_writers_and_recallers_through_sigkills_lose_duplicate_and_corrupt_nothing(
        tmp_path: Path) -> None:
    report = run_soak(SoakConfig(seconds=120, writers=32, recallers=8, kill_every_s=45, embedder="hash",
                                 out=tmp_path))
    totals, flat = report["totals"], report["flatness"]
    assert totals["kills"] >= 2
    assert totals["acknowledged"] > 1000 and totals["recalls"] > 100
    assert (totals["lost"], totals["duplicated"], totals["wrong"]) == (0, 0, 0), totals
    assert totals["doctor_findings"] == 0, totals["doctor_kinds"]
    assert totals["foreign_rows"] == 0 and totals["duplicate_reports"] == 0 and totals["tool_errors"] == {}
    assert totals["rows"] == totals["acknowledged"] + totals["applied_unacknowledged"]
    assert flat["fd_growth_max"] <= 8, flat
    assert all(m["adds"] > 0 for m in report["minutes"])  # it kept writing through the kills
