"""``diagnostics["stages_ms"]``: where one recall spent its time, charged to the stage that spent it."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.recall.stages import BESIDE, Stages, describe
from tests.support.backends import open_core

SLOW_S = 0.08
ON_THE_CALLER = ("read", "embed", "vector", "wait", "rank")


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("persistent", tmp_path / "data", request)
    for i in range(12):
        c.add_memory("acme", f"s{i % 3}", ["ann", "bob"][i % 2], f"turn {i}: the kiln firing schedule, batch {i}")
    yield c
    c.close()


class SlowQueries:
    """The core's vector store, its searches held for SLOW_S."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def query(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(SLOW_S)
        return self.inner.query(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_every_stage_is_reported_and_the_callers_stages_add_up_to_the_recall(core: MemoryCore) -> None:
    result = core.recall("acme", "kiln firing schedule")
    stages = result.diagnostics["stages_ms"]
    assert list(stages) == ["read", "embed", "vector", "lexical", "entities", "wait", "rank"]
    assert all(ms >= 0 for ms in stages.values())
    on_caller = sum(stages[k] for k in ON_THE_CALLER)
    elapsed = result.diagnostics["elapsed_ms"]
    assert on_caller <= elapsed + 0.05 and elapsed - on_caller < 1.0, (stages, elapsed)


def test_a_slow_vector_search_is_charged_to_vector_alone(core: MemoryCore) -> None:
    core.recall("acme", "warm up")
    core._recaller.vectors = SlowQueries(core._recaller.vectors)  # type: ignore[assignment]
    stages = core.recall("acme", "kiln firing schedule").diagnostics["stages_ms"]
    assert stages["vector"] >= SLOW_S * 1000
    assert max(stages[k] for k in ("read", "embed", "wait", "rank")) < SLOW_S * 1000 / 2, stages


def test_a_slow_lexical_branch_shows_as_lexical_and_as_the_wait_for_it(core: MemoryCore) -> None:
    core.recall("acme", "warm up")
    class Slow:  # the lexical branch, held up
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def search(self, *args: Any) -> Any:
            time.sleep(SLOW_S)
            return self.inner.search(*args)

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    core._recaller.branches = [Slow(b) if b.NAME == "lexical" else b for b in core._recaller.branches]
    stages = core.recall("acme", "kiln firing schedule").diagnostics["stages_ms"]
    assert stages["lexical"] >= SLOW_S * 1000
    # it ran beside the embedding and the vector search: the caller waited only for what they did not cover
    covered = stages["embed"] + stages["vector"]
    assert stages["wait"] >= SLOW_S * 1000 - covered - 5, stages
    assert stages["vector"] < SLOW_S * 1000 / 2, stages


def test_the_rerank_stage_is_timed_apart_from_rank(core: MemoryCore) -> None:
    class Model:
        def score(self, query: str, passages: Sequence[str]) -> list[float]:
            time.sleep(SLOW_S)
            return [float(len(p)) for p in passages]

    core._recaller.reranker = Model()  # type: ignore[assignment]
    stages = core.recall("acme", "kiln firing schedule", preset="balanced-rerank").diagnostics["stages_ms"]
    assert stages["rerank"] >= SLOW_S * 1000 and stages["rank"] < SLOW_S * 1000 / 2, stages


@pytest.mark.slow
def test_an_empty_query_pages_the_newest_and_reports_no_stages(core: MemoryCore) -> None:
    result = core.recall("acme", "")  # no branch runs: there is nothing to attribute
    assert result.messages and "stages_ms" not in result.diagnostics and result.diagnostics["elapsed_ms"] >= 0


def test_a_stage_lapped_twice_adds_up_and_the_line_names_the_workers_apart() -> None:
    stages = Stages()
    for name in ("rank", "rerank", "rank"):
        time.sleep(0.002)
        stages.lap(name)
    stages.add("lexical", 3.0)
    ms = stages.as_dict()
    assert list(ms) == ["lexical", "rank", "rerank"] and ms["rank"] >= 4.0
    line = describe(ms)
    assert line.startswith("rank ") and "rerank " in line and line.endswith("(beside embed and vector: lexical 3.0 ms)")
    assert all(k in line.split("(")[1] for k in BESIDE if k in ms)
