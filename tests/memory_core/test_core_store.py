"""The core store through its public API, on every backend."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.errors import InvalidCursorError, NotFoundError

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def stored_ids(core: MemoryCore, tenant: str) -> tuple[set[str], set[str]]:
    graph = {f"mem:{i}" for i in core._graph.memory_ids(tenant)}
    return graph, core._vectors.all_ids(tenant)


def test_add_memory_returns_a_ref_readable_from_both_stores(core: MemoryCore) -> None:
    res = core.add_memory("acme", "s1", "planner", "The deploy key rotates on Fridays.", type="note",
                          source={"id": "discord:42"}, channel="chat", metadata={"k": [1, 2]})
    assert res.ref.startswith("mem:") and res.created and res.duplicate_of is None
    row = core.get_contents("acme", [res.ref]).found[0]
    assert (row.content, row.type, row.agent, row.session) == ("The deploy key rotates on Fridays.", "note",
                                                              "planner", "s1")
    assert row.source == {"id": "discord:42"} and row.metadata == {"k": [1, 2]}
    assert row.timestamp.tzinfo is not None and row.content_len == len(row.content)
    graph, chroma = stored_ids(core, "acme")
    assert graph == chroma == {res.ref}


def test_add_memory_links_the_node_to_its_agent_and_session(core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s1", "planner", "hello").ref
    edges = {(e["kind"], e["node"]) for e in core.check_memory("acme", ref).neighbours["edges"]}
    assert ("AUTHORED_BY", "agent:acme/planner") in edges
    assert ("IN_SESSION", "session:acme/s1") in edges


def test_repeated_idempotency_key_returns_the_first_ref_without_writing(core: MemoryCore) -> None:
    first = core.add_memory("acme", "s1", "a", "first", idempotency_key="call-7")
    again = core.add_memory("acme", "s1", "a", "second attempt", idempotency_key="call-7")
    assert again.ref == first.ref and not again.created
    assert core._graph.count("acme") == 1
    other = core.add_memory("globex", "s1", "a", "first", idempotency_key="call-7")
    assert other.created and other.ref != first.ref


def test_idempotency_key_repeated_inside_one_batch_writes_once(core: MemoryCore) -> None:
    res = core.add_memories([
        {"tenant": "acme", "session": "s", "agent": "a", "content": "x", "idempotency_key": "k"},
        {"tenant": "acme", "session": "s", "agent": "a", "content": "x", "idempotency_key": "k"},
    ])
    assert res[0].ref == res[1].ref and res[0].created and not res[1].created
    assert core._graph.count("acme") == 1


def test_identical_content_in_the_same_session_is_written_and_flagged(core: MemoryCore) -> None:
    """Another agent's same words (the author's own exact repeat is not stored: see test_hygiene.py)."""
    first = core.add_memory("acme", "s1", "a", "Ship it.")
    second = core.add_memory("acme", "s1", "b", "  ship   IT. ")
    elsewhere = core.add_memory("acme", "s2", "c", "Ship it.")
    assert second.duplicate_of == first.ref and second.ref != first.ref
    assert elsewhere.duplicate_of is None
    assert core._graph.count("acme") == 3


def test_duplicates_outside_the_window_are_not_flagged(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "a", "same", timestamp=T0)
    later = core.add_memory("acme", "s1", "a", "same", timestamp=T0 + timedelta(days=1))
    assert later.duplicate_of is None


@pytest.mark.parametrize(
    ("tenant", "code"),
    [(None, "TENANT_REQUIRED"), ("", "TENANT_REQUIRED"), ("   ", "TENANT_REQUIRED"),
     ("a b", "INVALID_TENANT"), ("-x", "INVALID_TENANT"), ("x" * 200, "INVALID_TENANT"),
     (42, "INVALID_TENANT"), ("t\x00", "INVALID_TENANT")],
)
def test_missing_or_malformed_tenant_fails_closed_on_every_call(core: MemoryCore, tenant: object, code: str) -> None:
    core.add_memory("acme", "s1", "a", "secret")
    calls = [
        lambda: core.add_memory(tenant, "s1", "a", "x"),  # type: ignore[arg-type]
        lambda: core.query_recent_turns(tenant, "s1"),  # type: ignore[arg-type]
        lambda: core.get_contents(tenant, ["mem:1"]),  # type: ignore[arg-type]
        lambda: core.check_memory(tenant, "mem:1"),  # type: ignore[arg-type]
        lambda: core.delete_memory(tenant, "mem:1"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(MemoryCoreError) as err:
            call()
        assert err.value.code == code
    assert core._graph.count("acme") == 1


@pytest.mark.parametrize(
    ("fields", "code"),
    [({"content": ""}, "EMPTY_CONTENT"), ({"content": " \n"}, "EMPTY_CONTENT"),
     ({"content": "x" * 100_001}, "CONTENT_TOO_LARGE"), ({"content": "a\x00b"}, "INVALID_INPUT"),
     ({"type": "Turn!"}, "INVALID_INPUT"), ({"visibility": "public"}, "INVALID_INPUT"),
     ({"metadata": {"f": float("nan")}}, "INVALID_INPUT"), ({"metadata": ["not", "object"]}, "INVALID_INPUT"),
     ({"metadata": {"k": object()}}, "INVALID_INPUT"), ({"timestamp": "2026-01-01T00:00:00"}, "INVALID_INPUT"),
     ({"timestamp": datetime(2026, 1, 1)}, "INVALID_INPUT"), ({"salience": 1.5}, "INVALID_INPUT"),
     ({"session": "has space"}, "INVALID_INPUT"), ({"agent": ""}, "INVALID_INPUT"),
     ({"metadata": {"d": [[[[[[[[[[[1]]]]]]]]]]]}}, "INVALID_INPUT"), ({"source": {"id": 7}}, "INVALID_INPUT"),
     ({"content": "\ud800"}, "INVALID_INPUT"), ({"bogus": 1}, "INVALID_INPUT")],
)
def test_bad_input_is_refused_with_a_code_and_writes_nothing(core: MemoryCore, fields: dict, code: str) -> None:
    item = {"tenant": "acme", "session": "s1", "agent": "a", "content": "ok", **fields}
    with pytest.raises(MemoryCoreError) as err:
        core.add_memories([item])
    assert err.value.code == code
    assert stored_ids(core, "acme") == (set(), set())


def test_one_bad_row_in_a_batch_writes_none_of_it(core: MemoryCore) -> None:
    good = {"tenant": "acme", "session": "s", "agent": "a", "content": "fine"}
    with pytest.raises(MemoryCoreError):
        core.add_memories([good, {**good, "content": ""}])
    assert core._graph.count("acme") == 0


def test_recent_turns_page_newest_first_without_gaps_or_repeats_on_equal_timestamps(core: MemoryCore) -> None:
    refs = [core.add_memory("acme", "s1", "a", f"turn {i}", timestamp=T0 + timedelta(seconds=i // 3)).ref
            for i in range(10)]
    core.add_memory("acme", "s1", "a", "a note, not a turn", type="note")
    seen, cursor = [], None
    while True:
        page = core.query_recent_turns("acme", "s1", limit=3, cursor=cursor)
        seen += [t.ref for t in page.turns]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == list(reversed(refs))


def test_turns_arriving_between_pages_never_shift_the_next_page(core: MemoryCore) -> None:
    for i in range(6):
        core.add_memory("acme", "s1", "a", f"old {i}", timestamp=T0 + timedelta(seconds=i))
    page1 = core.query_recent_turns("acme", "s1", limit=3)
    core.add_memory("acme", "s1", "a", "brand new")
    page2 = core.query_recent_turns("acme", "s1", limit=3, cursor=page1.next_cursor)
    assert [t.content for t in page1.turns + page2.turns] == [f"old {i}" for i in range(5, -1, -1)]
    assert page2.next_cursor is None


def test_last_page_has_no_next_cursor(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "a", "only")
    page = core.query_recent_turns("acme", "s1", limit=1)
    assert len(page.turns) == 1 and page.next_cursor is None


def test_foreign_or_edited_cursor_is_refused(core: MemoryCore) -> None:
    for i in range(3):
        core.add_memory("acme", "s1", "a", f"t{i}")
        core.add_memory("globex", "s1", "a", f"g{i}")
    cursor = core.query_recent_turns("acme", "s1", limit=1).next_cursor
    assert cursor is not None
    for bad_call in (
        lambda: core.query_recent_turns("globex", "s1", limit=1, cursor=cursor),
        lambda: core.query_recent_turns("acme", "s2", limit=1, cursor=cursor),
        lambda: core.query_recent_turns("acme", "s1", limit=1, cursor=cursor[:-2] + "zz"),
        lambda: core.query_recent_turns("acme", "s1", limit=1, cursor="garbage"),
    ):
        with pytest.raises(InvalidCursorError):
            bad_call()


@pytest.mark.parametrize("limit", [0, 101, -1, True, "5"])
def test_recent_turns_limit_outside_1_to_100_is_refused(core: MemoryCore, limit: object) -> None:
    with pytest.raises(MemoryCoreError) as err:
        core.query_recent_turns("acme", "s1", limit=limit)  # type: ignore[arg-type]
    assert err.value.code == "INVALID_INPUT"


def test_foreign_deleted_and_malformed_refs_land_in_missing(core: MemoryCore) -> None:
    mine = core.add_memory("acme", "s1", "a", "mine").ref
    theirs = core.add_memory("globex", "s1", "a", "theirs").ref
    gone = core.add_memory("acme", "s1", "a", "gone").ref
    core.delete_memory("acme", gone)
    res = core.get_contents("acme", [mine, theirs, gone, "mem:abc", "nope", 17, "ep:999", mine])
    assert [r.ref for r in res.found] == [mine, mine]  # asked twice, answered twice
    assert res.missing == [theirs, gone, "mem:abc", "nope", "17", "ep:999"]


def test_every_requested_ref_is_accounted_for_under_the_exact_string_sent(core: MemoryCore) -> None:
    mine = core.add_memory("acme", "s1", "a", "mine").ref
    asked = [f" {mine}", mine, f"{mine}\n", "mem:999999", " mem:999999", mine]
    res = core.get_contents("acme", asked)
    assert [r.ref for r in res.found] == [mine, mine, mine, mine]
    assert res.requested == [f" {mine}", mine, f"{mine}\n", mine]
    assert res.missing == ["mem:999999", " mem:999999"]
    assert sorted(res.requested + res.missing) == sorted(asked)


def test_another_tenants_ref_reads_as_missing_everywhere(core: MemoryCore) -> None:
    theirs = core.add_memory("globex", "s1", "a", "theirs").ref
    with pytest.raises(NotFoundError):
        core.check_memory("acme", theirs)
    assert core.delete_memory("acme", theirs) is False
    assert core.query_recent_turns("acme", "s1").turns == []
    assert core.get_contents("globex", [theirs]).found


def test_agent_private_memories_are_shown_only_to_their_author(core: MemoryCore) -> None:
    private = core.add_memory("acme", "s1", "alice", "scratch thought", visibility="agent").ref
    shared = core.add_memory("acme", "s1", "alice", "shared fact").ref
    assert [t.ref for t in core.query_recent_turns("acme", "s1", viewer="alice").turns] == [shared, private]
    assert [t.ref for t in core.query_recent_turns("acme", "s1", viewer="bob").turns] == [shared]
    assert [t.ref for t in core.query_recent_turns("acme", "s1").turns] == [shared]
    assert core.get_contents("acme", [private], viewer="bob").missing == [private]
    with pytest.raises(NotFoundError):
        core.check_memory("acme", private, viewer="bob")
    assert core.check_memory("acme", private, viewer="alice").memory.content == "scratch thought"


def test_check_memory_returns_full_content_and_adjacent_turns(core: MemoryCore) -> None:
    refs = [core.add_memory("acme", "s1", "a", f"turn {i} " + "x" * 3000, timestamp=T0 + timedelta(seconds=i)).ref
            for i in range(3)]
    check = core.check_memory("acme", refs[1])
    assert check.memory.content_len == len(check.memory.content) > 3000
    assert check.neighbours["previous"].ref == refs[0] and check.neighbours["next"].ref == refs[2]
    assert check.neighbours["author"]["agent"] == "a"


def test_delete_removes_the_memory_from_both_stores(core: MemoryCore) -> None:
    keep = core.add_memory("acme", "s1", "a", "keep").ref
    drop = core.add_memory("acme", "s1", "a", "drop").ref
    assert core.delete_memory("acme", drop) is True
    assert core.delete_memory("acme", drop) is False
    assert stored_ids(core, "acme") == ({keep}, {keep})
    assert [t.ref for t in core.query_recent_turns("acme", "s1").turns] == [keep]


def test_memories_survive_a_reopen_with_pages_and_cursors_intact(core: MemoryCore, reopen) -> None:  # type: ignore[no-untyped-def]
    refs = [core.add_memory("acme", "s1", "a", f"t{i}", timestamp=T0 + timedelta(seconds=i)).ref for i in range(5)]
    cursor = core.query_recent_turns("acme", "s1", limit=2).next_cursor
    again = reopen(core)
    try:
        page = again.query_recent_turns("acme", "s1", limit=2, cursor=cursor)
        assert [t.ref for t in page.turns] == [refs[2], refs[1]]
        assert stored_ids(again, "acme") == (set(refs), set(refs))
        assert again.add_memory("acme", "s1", "a", "after").ref not in refs
    finally:
        again.close()


def test_explicit_timestamps_are_kept_in_utc_with_microseconds(core: MemoryCore) -> None:
    ts = datetime(2023, 5, 8, 13, 56, 1, 123456, tzinfo=UTC)
    ref = core.add_memory("acme", "s1", "a", "imported", timestamp="2023-05-08T15:56:01.123456+02:00").ref
    assert core.get_contents("acme", [ref]).found[0].timestamp == ts


def test_handoffs_default_to_high_salience(core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s1", "a", "over to you", type="handoff").ref
    assert core.get_contents("acme", [ref]).found[0].salience == 0.95
