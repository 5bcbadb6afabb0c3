"""The dated branch: a day the question names brings that day's memories into recall's pool."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.errors import StoreUnavailableError
from memory_core.recall import presets
from memory_core.recall.branches import dated
from memory_core.recall.query import read_query
from memory_core.vectors.api import VectorHit

DAY = datetime(2025, 3, 11, 15, 0, tzinfo=UTC)
QUESTION = "What did the team talk about on 11 March 2025?"


def _busy_tenant(core: MemoryCore, tenant: str = "acme") -> str:
    """300 rows of earlier months that match the question's words far better than the day's own row."""
    items: list[dict[str, Any]] = [
        {"tenant": tenant, "session": f"s{i % 30}", "agent": "planner", "type": "note",
         "content": f"the team talk {i}: what did the team talk about, the team talked about talk {i}",
         "timestamp": (DAY - timedelta(days=40 + i)).isoformat()}
        for i in range(300)
    ]
    core.add_memories(items)
    return core.add_memory(tenant, "standup", "planner", "the team chose the garden fence supplier",
                           type="note", timestamp=DAY).ref


def _refs(core: MemoryCore, question: str = QUESTION, **kw: Any) -> list[str]:
    return [m.ref for m in core.recall("acme", question, limit=5, deep=True, **kw).messages]


@pytest.mark.slow
def test_a_day_the_question_names_brings_its_row_into_a_busy_tenant(core: MemoryCore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    wanted = _busy_tenant(core)
    res = core.recall("acme", QUESTION, limit=5, deep=True)
    assert wanted in [m.ref for m in res.messages]
    assert res.diagnostics["dated_joined"] >= 1
    row = next(m for m in res.messages if m.ref == wanted)
    assert row.match_reason is not None and row.match_reason["time"] == 1.0
    # without the branch the day's row is not near enough to the question to join the pools
    monkeypatch.setitem(presets.PRESETS, "balanced", presets.PRESETS["balanced"].tuned({"dated.pool": 0}))
    assert wanted not in _refs(core)


def test_a_relative_day_or_a_month_does_not_read_a_day_of_rows() -> None:
    cfg = presets.PRESETS["balanced"]
    for question in ("what did the team talk about yesterday?", "what did the team talk about in March 2025?"):
        reading = read_query(question, [], DAY)
        assert reading.dates
        assert dated.search(_NoWorkers(), None, None, None, reading, [1.0], cfg) is None  # type: ignore[arg-type]


@pytest.mark.slow
def test_the_days_rows_pass_the_filters_before_the_cut(core: MemoryCore) -> None:
    wanted = _busy_tenant(core)
    hidden = [core.add_memory("acme", "standup", "coder", f"the team chose supplier {i} privately",
                              type="note", visibility="agent", timestamp=DAY + timedelta(minutes=i)).ref
              for i in range(30)]
    other_type = core.add_memory("acme", "standup", "planner", "the team chose the garden fence supplier today",
                                 type="turn", timestamp=DAY).ref
    core.add_memory("other", "standup", "planner", "the team chose the garden fence supplier",
                    type="note", timestamp=DAY)
    refs = _refs(core, viewer="planner", type="note")
    assert wanted in refs
    assert not set(hidden) & set(refs) and other_type not in refs
    assert all(m.tenant == "acme" for m in core.recall("acme", QUESTION, limit=20, deep=True).messages)
    # the writer of the private rows sees them
    assert set(hidden) & set(_refs(core, viewer="coder"))


def test_a_vector_store_failing_the_days_query_costs_only_the_days_rows() -> None:
    failed: Future[list[VectorHit]] = Future()
    failed.set_exception(StoreUnavailableError("The vector store is down."))
    diagnostics: dict[str, Any] = {}
    assert dated.joined(failed, [VectorHit("m:1", 0.2)], diagnostics) == []
    assert diagnostics["dated_search"].startswith("unavailable")
    found: Future[list[VectorHit]] = Future()
    found.set_result([VectorHit("m:1", 0.2), VectorHit("m:2", 0.5)])
    assert dated.joined(found, [VectorHit("m:1", 0.2)], diagnostics) == [VectorHit("m:2", 0.5)]
    assert diagnostics["dated_joined"] == 1


class _NoWorkers:
    def submit(self, *args: object) -> None:
        raise AssertionError("no day named: nothing is read")
