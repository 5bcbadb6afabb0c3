"""Asking for more rows only adds rows: the first ones do not depend on ``limit``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core import MemoryCore

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
TOPICS = ["kiln", "invoice", "parking", "printer", "release", "lunch", "backup", "tenant"]
VERBS = ["moved", "failed", "was fixed", "is late", "needs review", "was cancelled"]
WHEN = ["on Monday", "after the audit", "before the demo", "at noon", "this sprint"]


def _fill(core: MemoryCore, kind: str) -> None:
    items = []
    for i in range(150):  # more memories than the vector pool, so a larger limit widens it
        topic, other = TOPICS[i % len(TOPICS)], TOPICS[(i * 3 + 1) % len(TOPICS)]
        text = f"The {topic} {VERBS[i % len(VERBS)]} {WHEN[i % len(WHEN)]}, said the {other} owner."
        items.append({"tenant": "acme", "session": f"s{i % 7}", "agent": "planner", "content": text,
                      "type": kind, "timestamp": T0 + timedelta(hours=i)})
    core.add_memories(items)


@pytest.mark.parametrize("kind", ["note", "turn"])  # turns: neighbour joins and session support too
def test_the_best_rows_of_a_recall_are_the_same_whatever_limit_asks_for(core: MemoryCore, kind: str) -> None:
    _fill(core, kind)
    for query in ("when did the kiln move?", "the invoice failed at noon", "printer backup review",
                  "which release was cancelled before the demo?"):
        few = [m.ref for m in core.recall("acme", query, limit=5).messages]
        many = [m.ref for m in core.recall("acme", query, limit=50).messages]
        assert many[: len(few)] == few, query
