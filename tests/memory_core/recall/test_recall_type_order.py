"""How a type-filtered recall orders its rows (issue 37, point 1; docs/recall-ordering.md).

Under ``type: "handoff"`` the newest handoff comes first whatever the gap and however poorly
it matches the words of the query, as long as it passes the quality gate: relevance admits,
time orders. Other types keep the weighted recency (0.5, 7-day half-life): a newer decision
that matches the query less does not outrank the one the query asks about.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core import MemoryCore

NOW = datetime.now(UTC)
# three write-ups of one piece of work: the newest says least about what the query asks
WRITE_UPS = (
    "billing queue migration to postgres; the retry worker and the dead-letter queue still need review",
    "billing queue migration done, retry worker reviewed; the dead-letter queue review is left",
    "dead-letter queue reviewed too; next step is the release notes",
)
QUERY = "billing queue migration retry worker"
GAPS = {"hours": (50.0, 26.0, 2.0), "days": (120.0, 72.0, 24.0)}  # hours ago, oldest first


def ago(hours: float) -> datetime:
    return NOW - timedelta(hours=hours)


def write_ups(core: MemoryCore, tenant: str, kind: str, hours: tuple[float, ...]) -> list[str]:
    """The three write-ups as ``kind`` rows, each in its own session, oldest first; an unrelated one beside."""
    refs = [core.add_memory(tenant, f"s{i}", "planner", f"{kind}: {text}", type=kind, timestamp=ago(h)).ref
            for i, (h, text) in enumerate(zip(hours, WRITE_UPS, strict=True))]
    core.add_memory(tenant, "other", "planner", f"{kind}: lunch is at noon on fridays", type=kind)
    return refs


@pytest.mark.parametrize("gap", sorted(GAPS))
def test_the_newest_handoff_comes_first_even_when_it_matches_the_query_least(core: MemoryCore, gap: str) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS[gap])
    result = core.recall("acme", QUERY, type="handoff")
    assert [m.ref for m in result.messages] == list(reversed(refs))  # newest first; lunch fails the gate
    confidence = {m.ref: m.confidence for m in result.messages}
    assert confidence[refs[2]] < confidence[refs[1]]  # relevance alone would have put it last
    assert result.order == "newest_first"


def test_limit_keeps_the_newest_handoffs_that_pass_the_gate(core: MemoryCore) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    assert [m.ref for m in core.recall("acme", QUERY, type="handoff", limit=1).messages] == [refs[2]]


def test_deep_orders_handoffs_by_relevance_again(core: MemoryCore) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    result = core.recall("acme", QUERY, type="handoff", deep=True)
    assert [m.ref for m in result.messages][-1] == refs[2]
    assert result.order is None


@pytest.mark.slow
@pytest.mark.parametrize("gap", sorted(GAPS))
def test_decisions_hours_apart_stay_in_relevance_order_and_recency_only_weighs(core: MemoryCore, gap: str) -> None:
    # The rule is the handoff's. A decision is one fact among many: the newest decision, about the
    # release notes, is not what "billing queue migration retry worker" asks for, so it stays last.
    refs = write_ups(core, "acme", "decision", GAPS[gap])
    result = core.recall("acme", QUERY, type="decision")
    order = [m.ref for m in result.messages]
    assert order[-1] == refs[2] and set(order) == set(refs)
    assert result.order is None
    confidence = [m.confidence or 0.0 for m in result.messages]
    assert confidence == sorted(confidence, reverse=True)


def test_equally_relevant_decisions_come_newest_first(core: MemoryCore) -> None:
    # recency still weighs for other types: between equal matches hours apart, the newest wins
    old = core.add_memory("acme", "a", "planner", "decision: ship the billing migration on friday", type="decision",
                          timestamp=ago(26)).ref
    new = core.add_memory("acme", "b", "planner", "decision: ship the billing migration on friday", type="decision",
                          timestamp=ago(2)).ref
    result = core.recall("acme", "billing migration friday", type="decision", collapse=False)  # the same text twice
    assert [m.ref for m in result.messages][:2] == [new, old]


def test_recall_with_context_orders_handoffs_newest_first_too(core: MemoryCore) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    context = [{"role": "user", "content": "where were we with the billing queue?"}]
    result = core.recall_with_context("acme", QUERY, context, type="handoff")
    assert [m.ref for m in result.messages] == list(reversed(refs))
    assert result.order == "newest_first"


def test_recover_context_returns_the_newest_handoff_whatever_order_they_were_written_in(core: MemoryCore) -> None:
    # written newest first (an import, a late sync): recover_context still reads the newest by time
    for hours, text in sorted(zip(GAPS["hours"], WRITE_UPS, strict=True)):
        core.create_handoff("acme", "work", "planner", f"handoff: {text}", timestamp=ago(hours))
    recovered = core.recover_context("acme", "work")
    assert recovered.handoff is not None and recovered.handoff.content == f"handoff: {WRITE_UPS[2]}"


def test_the_rule_never_reaches_into_another_tenant_or_a_private_row(core: MemoryCore) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    core.add_memory("globex", "s", "planner", f"handoff: {WRITE_UPS[0]}", type="handoff")
    core.add_memory("acme", "mine", "bob", f"handoff: {WRITE_UPS[0]}", type="handoff", visibility="agent")
    assert [m.ref for m in core.recall("acme", QUERY, type="handoff", viewer="alice").messages] == \
        list(reversed(refs))
