"""bench.quality.recovery on one coding session with the fast embedder: three blocks at each compaction,
each within the budget in cl100k tokens, scored against the evidence the next questions need."""

from __future__ import annotations

from pathlib import Path

from bench.common import open_bench_core
from bench.quality.recovery import Board, Replay, coding_sessions, command_for
from memory_core.embedding.local import HashEmbedder


def test_each_compaction_gets_three_blocks_within_budget_and_a_score(tmp_path: Path) -> None:
    session = coding_sessions()[0]
    core = open_bench_core(tmp_path / "store", HashEmbedder())
    boards: dict[str, Board] = {}
    try:
        replay = Replay(core, session, 800, tmp_path / "states")
        done = 0
        for cut in session.cuts[:2]:
            replay.ingest(session.steps[done:cut])
            done = cut
            point = replay.point(done)
            assert point.needed
            assert set(point.blocks) == {"last turns", "recover_context", "hook"}
            for method, (text, named) in point.blocks.items():
                assert len(replay.encoding.encode(text)) <= 800, method
                assert set(named) <= {s.key for s in session.steps[:cut]}  # nothing from after the compaction
                boards.setdefault(method, Board()).add(point.needed, text, named, replay.encoding, method == "hook")
    finally:
        core.close()
    hook = boards["hook"].summary()
    assert 0 < hook["coverage"] <= 1 and 0 < hook["precision"] <= 1 and hook["exact_over_estimate_max"] <= 1


def test_a_traceback_becomes_the_test_run_that_showed_it() -> None:
    traceback = 'KeyError\nTraceback (most recent call last):\n  File "src/billing/api.py", line 3, in parse_token\n'
    assert command_for(traceback) == "pytest -x -k parse_token tests/billing/test_api.py"
    assert command_for("no traceback here") == "pytest -x"
