"""How a type-filtered recall orders its rows (issue 37, point 1; docs/recall-ordering.md).

Under ``type: "handoff"`` the newest handoff comes first whatever the gap and however poorly
it matches the words of the query, as long as it passes the quality gate: relevance admits,
time orders. Other types keep the weighted recency (0.5, 7-day half-life): a newer decision
that matches the query less does not outrank the one the query asks about.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import shared_minilm
from tests.support.backends import open_core

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


@pytest.fixture
def model_core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    """The default model: whether two handoffs read alike is a question of meaning (the hash embedder's
    bag of words cannot tell "payments API migration" from "billing queue migration")."""
    c = open_core("memory", tmp_path / "data", request, embedder=shared_minilm())
    yield c
    c.close()


# issue 47 point 1: other pieces of work's handoffs, newer than the ones asked for
UNRELATED = ("the office plants were watered", "design review of the new logo finished")
SIBLING = "payments API migration: v2 endpoints are live behind a flag, clients still call v1"
# a month of one team's handoffs: five pieces of work, three handoffs each, oldest first
MONTH = {
    "payments-api": ("payments-api: v2 endpoints live behind a flag, clients still on v1",
                     "payments-api: mobile client moved to v2, web client next",
                     "payments-api: web client switched, v1 can be retired after the notice period"),
    "search": ("search index rebuild started on the new cluster, shards 1-4 reindexed",
               "search reindex of shards 5-8 done, aliases not swapped yet",
               "search aliases swapped to the rebuilt index, old cluster can be drained"),
    "billing": WRITE_UPS,
    "login": ("login page redesign mocked up, SSO button placement open",
              "login layout behind a feature flag, accessibility review pending",
              "login accessibility fixes merged, rollout to 10% tomorrow"),
    "backups": ("database backup schedule moved to 02:00 UTC, snapshots kept 14 days",
                "restore drill from the nightly snapshot took 40 minutes",
                "database backups now copied to the second region"),
}


@pytest.mark.parametrize("prefix", ["handoff: ", ""])
def test_newer_handoffs_of_other_work_stay_out_of_a_handoff_search(model_core: MemoryCore, prefix: str) -> None:
    core = model_core
    refs = [core.add_memory("acme", f"s{i}", "planner", f"{prefix}{text}", type="handoff", timestamp=ago(h)).ref
            for i, (h, text) in enumerate(zip((120.0, 26.0, 2.0), WRITE_UPS, strict=True))]
    for text in UNRELATED:  # newer than every billing handoff, and sharing the word every handoff has
        core.add_memory("acme", "misc", "planner", f"{prefix}{text}", type="handoff", timestamp=ago(0.5))
    result = core.recall("acme", "handoff for the billing queue migration", type="handoff")
    assert [m.ref for m in result.messages] == list(reversed(refs))
    assert result.order == "newest_first"


def test_a_sibling_topic_sharing_one_word_stays_out(model_core: MemoryCore) -> None:
    core = model_core
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    core.add_memory("acme", "pay", "planner", f"handoff: {SIBLING}", type="handoff", timestamp=ago(1))
    assert [m.ref for m in core.recall("acme", QUERY, type="handoff").messages] == list(reversed(refs))


def test_a_month_of_several_works_handoffs_answers_with_the_one_asked_for(model_core: MemoryCore) -> None:
    core = model_core
    written: dict[str, list[str]] = {}
    for n, (work, texts) in enumerate(MONTH.items()):
        for i, text in enumerate(texts):  # interleaved over 30 days, each work's newest the latest of its own
            when = ago(24 * (30 - 2 * i * len(MONTH) - n) + 1)
            written.setdefault(work, []).append(
                core.add_memory("acme", f"{work}-{i}", "planner", f"handoff: {text}", type="handoff",
                                timestamp=when).ref)
    for work, query in (("payments-api", "payments-api handoff"), ("search", "search index rebuild handoff"),
                        ("billing", QUERY), ("backups", "handoff for the database backups")):
        result = core.recall("acme", query, type="handoff")
        assert [m.ref for m in result.messages] == list(reversed(written[work])), (query, result.messages)


def test_what_every_handoff_says_is_counted_in_the_callers_tenant_and_view_only(model_core: MemoryCore) -> None:
    core = model_core
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    for i in range(20):  # were they counted, "billing" and "queue" would be what nearly every handoff says
        core.add_memory("globex", "s", "planner", f"handoff: billing queue migration item {i}", type="handoff")
        core.add_memory("acme", "mine", "bob", f"handoff: billing queue migration item {i}", type="handoff",
                        visibility="agent")
    result = core.recall("acme", "handoff for the billing queue migration retry worker", type="handoff",
                         viewer="alice")
    assert result.diagnostics["common_words"] == ["hando"]  # the type's own name only
    assert [m.ref for m in result.messages] == list(reversed(refs))


def test_a_query_of_nothing_but_what_every_handoff_says_keeps_every_handoff(core: MemoryCore) -> None:
    refs = write_ups(core, "acme", "handoff", GAPS["hours"])
    result = core.recall("acme", "latest handoff", type="handoff")  # nothing to tell them apart: all, newest first
    assert len(result.messages) == 4 and set(refs) <= {m.ref for m in result.messages}
    assert [m.timestamp for m in result.messages] == sorted((m.timestamp for m in result.messages), reverse=True)


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
