"""Reading a query: agent names at bounded cost, relative dates, and what context excludes."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from graph.agent_names import AgentNameIndex
from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.recall.dates import parse_dates
from memory_core.recall.filters import holds, normalize
from memory_core.recall.query import read_query
from tests.support.backends import open_core

ANCHOR = datetime(2025, 6, 18, 15, 0, tzinfo=UTC)  # a Wednesday


def test_finding_names_costs_the_same_with_twenty_thousand_agents_as_with_three() -> None:
    small, large = AgentNameIndex(), AgentNameIndex()
    for name in ("alice", "bob", "bot-7.x"):
        small.add(name)
        large.add(name)
    for i in range(20_000):
        large.add(f"bot-{i}.x")
    query = "what did bot-7.x and alice decide about the deploy key rotation on friday " * 4
    found = {m.name for m in large.find(query)}
    assert found == {"bot-7.x", "alice"}
    small.find(query)
    # one dict lookup per (query token, distinct name length): nothing grows with the agents
    tokens = len(query.split()) + 2 * query.count("bot-7.x")
    assert small.probes == large.probes <= tokens * 3


@pytest.mark.slow
def test_recall_reads_names_through_the_tenant_index_without_touching_each_agent(core: MemoryCore) -> None:
    core.add_memories([{"tenant": "acme", "session": "s", "agent": f"bot-{i}.x", "content": f"status line {i}"}
                       for i in range(400)])
    core.add_memory("acme", "s", "caroline", "the kiln firing schedule moved to Thursday")
    index = core._graph.agent_names("acme")
    before = index.probes
    res = core.recall("acme", "what did Caroline say about the kiln?")
    assert res.messages[0].agent == "caroline"
    assert res.messages[0].match_reason["speaker"] == "caroline"
    assert index.probes - before <= 8 * 3  # 8 query tokens × 3 distinct name lengths


def test_a_name_with_punctuation_is_found_by_its_words_and_stripped_from_the_embedded_text() -> None:
    reading = read_query("Did bot-12.x's run fail, or Ann's?", ["bot-12.x", "ann", "bot-1"])
    assert reading.named == {"bot-12.x", "ann"}
    assert reading.semantic == "Did run fail, or ?"


@pytest.mark.parametrize(("text", "start", "end", "kind"), [
    ("what did we decide yesterday?", "2025-06-17", "2025-06-18", "day"),
    ("the day before yesterday", "2025-06-16", "2025-06-17", "day"),
    ("what broke today", "2025-06-18", "2025-06-19", "day"),
    ("what happened last week", "2025-06-09", "2025-06-16", "day"),
    ("three days ago", "2025-06-15", "2025-06-16", "day"),
    ("two months ago", "2025-04-01", "2025-05-01", "month"),
    ("a couple of weeks ago", "2025-06-02", "2025-06-09", "day"),
    ("last month", "2025-05-01", "2025-06-01", "month"),
    ("last year", "2024-01-01", "2025-01-01", "year"),
    ("what did we ship in March", "2025-03-01", "2025-04-01", "month"),
    ("what did we ship in September", "2024-09-01", "2024-10-01", "month"),
    ("last Monday", "2025-06-16", "2025-06-17", "day"),
])
def test_relative_dates_resolve_against_the_anchor(text: str, start: str, end: str, kind: str) -> None:
    (window,) = parse_dates(text, ANCHOR)
    assert (window.start.date().isoformat(), window.end.date().isoformat(), window.kind) == (start, end, kind)
    assert window.relative


def test_relative_dates_without_an_anchor_are_left_alone() -> None:
    assert parse_dates("what did we decide yesterday, two months ago?") == []


def test_yesterday_in_a_query_favours_the_relevant_row_written_the_day_before_the_newest(core: MemoryCore) -> None:
    day = datetime(2025, 6, 10, 12, tzinfo=UTC)
    older = core.add_memory("acme", "s1", "planner", "decision: the cache TTL is 5 minutes",
                            type="decision", timestamp=day - timedelta(days=6)).ref
    wanted = core.add_memory("acme", "s2", "planner", "decision: the cache TTL is 10 minutes",
                             type="decision", timestamp=day - timedelta(days=1)).ref
    core.add_memory("acme", "s3", "coder", "lunch order for the team", timestamp=day)
    res = core.recall("acme", "what did we decide about the cache TTL yesterday?", deep=True)
    order = [m.ref for m in res.messages]
    assert order.index(wanted) < order.index(older)
    assert next(m.match_reason for m in res.messages if m.ref == wanted)["time"] == 1.0
    # a caller's `now` moves the anchor: six days before it is the older decision's day
    res = core.recall("acme", "what did we decide about the cache TTL six days ago?", deep=True,
                      now=day)
    assert res.messages[0].ref == older


def test_a_now_without_a_timezone_is_refused(core: MemoryCore) -> None:
    with pytest.raises(MemoryCoreError) as err:
        core.recall("acme", "yesterday", now=datetime(2025, 1, 1))
    assert err.value.code == "INVALID_INPUT"


def test_a_short_context_entry_excludes_only_an_identical_row(core: MemoryCore) -> None:
    kiln = core.add_memory("acme", "s", "ann", "Yes, the kiln firing schedule moved to Thursday.").ref
    same = core.add_memory("acme", "s2", "ann", "Yes").ref
    res = core.recall_with_context("acme", "kiln firing schedule", [{"role": "user", "content": "Yes"}])
    refs = [m.ref for m in res.messages]
    assert kiln in refs and same not in refs


def test_a_long_context_entry_excludes_rows_it_prefixes_after_nfc_normalisation(core: MemoryCore) -> None:
    text = "Cafe\u0301 menu: the kiln firing schedule moved to Thursday, glazes on Friday."
    row = core.add_memory("acme", "s", "ann", text).ref
    core.add_memory("acme", "s", "ann", "The kiln firing schedule is posted on the studio door.")
    held = "Caf\u00e9 menu: the kiln firing schedule moved"  # composed é, a preview-like prefix
    res = core.recall_with_context("acme", "kiln firing schedule", [{"role": "user", "content": held}])
    assert row not in [m.ref for m in res.messages] and res.messages


def test_holding_compares_prefixes_only_when_the_shorter_side_identifies_a_row() -> None:
    assert holds(normalize("Yes"), normalize("yes"))
    assert not holds(normalize("Yes"), normalize("Yes, the kiln firing schedule moved to Thursday."))
    assert not holds(normalize("Yes, the kiln firing schedule moved to Thursday."), normalize("Yes"))
    assert holds(normalize("Yes, the kiln firing schedule"), normalize("yes, the  kiln firing schedule moved"))


def test_an_agent_named_like_an_ordinary_word_lifts_its_rows_less_than_a_written_name(core: MemoryCore) -> None:
    for i in range(4):
        core.add_memory("acme", f"s{i}", "user", f"can you look at the dashboard colours, item {i}?", role="user")
    reply = core.add_memory("acme", "s9", "coder", "The retry loop now stops after three attempts.",
                            role="assistant").ref
    res = core.recall("acme", "what did we change in the retry loop for the user?", limit=3)
    assert res.messages[0].ref == reply
    reading = read_query("what did the user ask Caroline?", ["user", "Caroline"])
    assert reading.named == {"user", "Caroline"} and reading.as_name == {"Caroline"}
    assert "user" in reading.terms and "caroline" not in reading.terms  # an ordinary word stays one to match


def test_named_agents_are_embedded_as_the_pronouns_their_own_turns_use() -> None:
    agents = ["Nate", "Joanna", "bot-12.x"]
    assert read_query("What did Nate give Joanna?", agents, pronouns=True).semantic == "What did I give you?"
    mine = read_query("What inspired Joanna's painting?", agents, pronouns=True)
    assert mine.semantic == "What inspired my painting?"
    typographic = read_query("What did Nate give Joanna’s sister?", agents, pronouns=True)
    assert typographic.semantic == "What did I give your sister?"
    # the first agent named is "I" wherever it recurs; the others are "you"
    spoken = read_query("Did Nate tell Joanna about Nate's turtles on 8 May 2023?", agents, pronouns=True)
    assert spoken.semantic == "Did I tell you about my turtles on ?"
    assert spoken.terms == ["tell", "turtles"] and spoken.named == {"Nate", "Joanna"}  # matched words: unchanged
    # a query naming no agent, or written in lower case ("the user"), reads as before
    assert read_query("what broke the deploy?", agents, pronouns=True).semantic == "what broke the deploy?"
    assert read_query("Did bot-12.x's run fail?", agents).semantic == "Did run fail?"


class _Recording(HashEmbedder):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.seen += list(texts)
        return super().embed(texts)


def test_recall_embeds_the_question_in_the_voice_of_the_memories(tmp_path: Path,
                                                                  request: pytest.FixtureRequest) -> None:
    embedder = _Recording()
    core = open_core("memory", tmp_path / "d", request, embedder=embedder)
    try:
        target = core.add_memory("acme", "s1", "Nate", "Nate: Looky here, I got this new pup for you!").ref
        core.add_memory("acme", "s1", "Joanna", "Joanna: I finished my screenplay yesterday.")
        embedder.seen.clear()
        res = core.recall("acme", "What did Nate get for Joanna?")
        assert embedder.seen == ["What did I get for you?"]
        assert res.messages[0].ref == target
    finally:
        core.close()
