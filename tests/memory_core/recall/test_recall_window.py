"""The lexical window index, query reading (names, dates) and the graph signals recall uses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from graph.sqlite.db import WINDOW_ROWS_SQL, window_table_name
from memory_core import MemoryCore
from memory_core.recall.query import parse_dates, read_query
from tests.support.sqlite import sqlite_db

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def windows(core: MemoryCore, tenant: str) -> tuple[list[tuple], list[tuple]]:
    """(what the tenant's window table holds, what WINDOW_ROWS_SQL says it must hold)."""
    with sqlite_db(core).lock:
        conn = sqlite_db(core).conn
        got = sorted(tuple(r) for r in conn.execute(f"SELECT rowid, content, prev FROM {window_table_name(tenant)}"))
        want = sorted(tuple(r) for r in conn.execute(WINDOW_ROWS_SQL, (tenant,)))
    return got, want


def test_the_window_holds_the_previous_shared_memory_through_late_inserts_and_deletes(core: MemoryCore) -> None:
    refs = {i: core.add_memory("acme", "s", "a", f"row {i}", timestamp=at(i)).ref for i in (0, 2, 4)}
    core.add_memory("acme", "s", "b", "private 3", visibility="agent", timestamp=at(3))
    core.add_memory("acme", "s", "a", "row 1", timestamp=at(1))  # late: row 2's window now starts at row 1
    core.add_memories([{"tenant": "acme", "session": "t", "agent": "a", "content": f"same {i}", "timestamp": T0}
                       for i in range(3)])  # equal timestamps: the id decides the order
    core.add_memory("globex", "s", "a", "row 1 of globex", timestamp=at(2))
    got, want = windows(core, "acme")
    assert got == want
    by_text = {content: prev for _id, content, prev in got}
    assert by_text["row 2"] == "row 1" and by_text["row 4"] == ""  # a private predecessor lends nothing
    assert by_text["same 2"] == "same 1" and by_text["row 0"] == ""
    core.delete_memory("acme", refs[2])  # its text leaves the next row's window too
    got, want = windows(core, "acme")
    assert got == want and {content: prev for _i, content, prev in got}["private 3"] == "row 1"
    assert windows(core, "globex")[0] == windows(core, "globex")[1] == [(windows(core, "globex")[0][0][0],
                                                                        "row 1 of globex", "")]


def test_a_store_without_window_tables_gets_them_at_open(core: MemoryCore, reopen) -> None:  # type: ignore[no-untyped-def]
    for i in range(4):
        core.add_memory("acme", "s", "a", f"turn {i} about the harbour", timestamp=at(i))
    with sqlite_db(core).transaction() as cur:
        cur.execute(f"DROP TABLE {window_table_name('acme')}")
    core = reopen(core)
    try:
        got, want = windows(core, "acme")
        assert got == want and len(got) == 4
        assert core.recall("acme", "harbour").messages
    finally:
        core.close()


@pytest.mark.slow
def test_a_reply_is_found_through_the_question_before_it(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "alice", "How was the conference in Lisbon last week?", timestamp=at(0))
    reply = core.add_memory("acme", "s1", "bob", "Great! The keynote on storage engines was the best part.",
                            timestamp=at(1)).ref
    for i in range(20):
        core.add_memory("acme", f"s{i + 2}", "carol", f"unrelated note {i} about lunch and parking",
                        timestamp=at(5 + i))
    res = core.recall("acme", "Lisbon conference", limit=3)
    assert reply in [m.ref for m in res.messages]
    reason = next(m.match_reason for m in res.messages if m.ref == reply)
    assert reason is not None and reason["bm25"] > 0


@pytest.mark.slow
def test_agents_named_in_the_query_are_read_from_the_graph(core: MemoryCore) -> None:
    for i in range(6):
        core.add_memory("acme", "s", "melanie", f"I went hiking with the kids on trail {i}", timestamp=at(2 * i))
        core.add_memory("acme", "s", "caroline", f"I went hiking alone on trail {i}", timestamp=at(2 * i + 1))
    res = core.recall("acme", "Where did Caroline go hiking?", limit=5)
    assert [m.agent for m in res.messages] == ["caroline"] * 5
    assert res.messages[0].match_reason["speaker"] == "caroline"
    assert read_query("Where did Caroline's kids go?", ["Caroline", "a", "the"]).named == {"Caroline"}
    assert read_query("Where did Caroline's kids go?", ["Caroline"]).semantic == "Where did kids go?"


@pytest.mark.slow
def test_a_date_in_the_query_favours_rows_of_that_time(core: MemoryCore) -> None:
    for day in range(1, 29):
        core.add_memory("acme", f"day{day}", "a", "we talked about the garden", timestamp=datetime(2023, 5, day, 12,
                                                                                                  tzinfo=UTC))
    # the same words every day isolate the date signal; collapsed, they would be one row (the newest)
    res = core.recall("acme", "What did we say about the garden on 8 May, 2023?", limit=5, collapse=False)
    # the day itself, or up to 14 days later (things are told a few days after they happen)
    assert all("2023-05-08" <= m.timestamp.date().isoformat() <= "2023-05-22" for m in res.messages)
    assert all(m.match_reason["time"] == 1.0 for m in res.messages)


@pytest.mark.parametrize(("text", "expected"), [
    ("on 8 May, 2023", [("2023-05-08", "2023-05-09", "day")]),
    ("on May 8th 2023 and 2021-12-31", [("2021-12-31", "2022-01-01", "day"), ("2023-05-08", "2023-05-09", "day")]),
    ("in Sept. 2021", [("2021-09-01", "2021-10-01", "month")]),
    ("during 2022", [("2022-01-01", "2023-01-01", "year")]),
    ("May I ask what happened in June?", [("2000-06-01", "2000-06-01", "month-any-year")]),
    ("on 31 February 2023, last week", [("2023-02-01", "2023-03-01", "month")]),  # no such day: the month
])
def test_absolute_dates_are_read_and_relative_ones_left_alone(text: str, expected: list) -> None:
    got = [(w.start.date().isoformat(), w.end.date().isoformat(), w.kind) for w in parse_dates(text)]
    assert got == expected
