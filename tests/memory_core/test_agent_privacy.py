"""Private (visibility="agent") memories inside a tenant, through the library.

Nothing another agent does — a retry with a colliding idempotency key, a duplicate of the
same text, a delete, a session summary, a check of a neighbouring row — may return, name,
count or remove a private row. Only its author reads or deletes it (and the operator, on
the explicit operator path).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core
from tests.support.sqlite import sqlite_db

SECRET = "alice-secret-zebra"


def private(core: MemoryCore, content: str = f"{SECRET} plan", session: str = "s", **fields: object) -> str:
    return core.add_memory("acme", session, "alice", content, visibility="agent", **fields).ref


# ---- idempotency keys ------------------------------------------------------------------------
def test_a_shared_write_reusing_a_key_of_another_agents_private_row_is_stored_under_its_own_ref(
    core: MemoryCore,
) -> None:
    theirs = private(core, idempotency_key="k-1")
    mine = core.add_memory("acme", "s", "bob", "bob's own note", idempotency_key="k-1")
    assert mine.created and mine.ref != theirs
    assert [r.content for r in core.get_contents("acme", [mine.ref], viewer="bob").found] == ["bob's own note"]
    assert core.add_memory("acme", "s", "bob", "bob's own note", idempotency_key="k-1").ref == mine.ref


def test_a_private_write_reusing_a_key_of_another_agents_private_row_is_stored_under_its_own_ref(
    core: MemoryCore,
) -> None:
    theirs = private(core, idempotency_key="k-2")
    mine = core.add_memory("acme", "s", "bob", "bob's scratch", visibility="agent", idempotency_key="k-2")
    assert mine.created and mine.ref != theirs
    assert core.get_contents("acme", [mine.ref], viewer="bob").found[0].content == "bob's scratch"


def test_a_retried_private_write_returns_its_first_ref(core: MemoryCore) -> None:
    first = private(core, idempotency_key="k-3")
    again = core.add_memory("acme", "s", "alice", f"{SECRET} plan", visibility="agent", idempotency_key="k-3")
    assert (again.ref, again.created) == (first, False)


def test_a_shared_key_still_answers_every_agent_of_the_tenant(core: MemoryCore) -> None:
    first = core.add_memory("acme", "s", "alice", "shared step", idempotency_key="k-4")
    again = core.add_memory("acme", "s", "bob", "shared step", idempotency_key="k-4")
    assert (again.ref, again.created) == (first.ref, False)


def test_keys_inside_one_batch_are_scoped_the_same_way(core: MemoryCore) -> None:
    results = core.add_memories([
        {"tenant": "acme", "session": "s", "agent": "alice", "content": SECRET, "visibility": "agent",
         "idempotency_key": "k-5"},
        {"tenant": "acme", "session": "s", "agent": "bob", "content": "bob in the batch", "idempotency_key": "k-5"},
    ])
    assert all(r.created for r in results) and results[0].ref != results[1].ref


def test_an_exported_private_row_keeps_the_key_its_author_gave(core: MemoryCore) -> None:
    private(core, idempotency_key="k-6")
    assert [line["idempotency_key"] for line in export_tenant(core.operator_parts(), "acme")] == ["k-6"]


def test_an_imported_private_row_still_answers_its_authors_retry_and_no_one_elses(
    core: MemoryCore, backend: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    private(core, idempotency_key="k-8")
    lines = [json.dumps(line) for line in export_tenant(core.operator_parts(), "acme")]
    second = open_core(backend, tmp_path / "second", request)
    try:
        assert import_lines(second.operator_parts(), lines, "acme").written == 1
        again = second.add_memory("acme", "s", "alice", f"{SECRET} plan", visibility="agent", idempotency_key="k-8")
        assert again.created is False
        assert second.add_memory("acme", "s", "bob", "bob after the import", idempotency_key="k-8").created
    finally:
        second.close()


def test_private_keys_written_before_scoping_move_to_their_authors_namespace_at_open(
    tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    core = open_core("persistent", tmp_path / "data", request)
    theirs = private(core, idempotency_key="k-7")
    with sqlite_db(core).transaction() as cur:  # what an older version (schema 1) stored: the bare key
        cur.execute("UPDATE memories SET idempotency_key = 'k-7'")
        cur.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    core.close()
    core = open_core("persistent", tmp_path / "data", request)
    try:
        mine = core.add_memory("acme", "s", "bob", "bob after the upgrade", idempotency_key="k-7")
        assert mine.created and mine.ref != theirs
        again = core.add_memory("acme", "s", "alice", f"{SECRET} plan", visibility="agent", idempotency_key="k-7")
        assert (again.ref, again.created) == (theirs, False)
    finally:
        core.close()


# ---- duplicate reports -----------------------------------------------------------------------
def test_duplicate_of_never_names_another_agents_private_row(core: MemoryCore) -> None:
    private(core, content="the same words")
    assert core.add_memory("acme", "s", "bob", "the same words").duplicate_of is None
    assert core.add_memory("acme", "s", "carol", "the same words", visibility="agent").duplicate_of is not None


def test_duplicate_of_names_the_writers_own_private_row(core: MemoryCore) -> None:
    mine = private(core, content="again and again")
    assert core.add_memory("acme", "s", "alice", "again and again").duplicate_of == mine


# ---- deletes ---------------------------------------------------------------------------------
def test_another_agents_private_row_cannot_be_deleted_and_reads_as_missing(core: MemoryCore) -> None:
    theirs = private(core)
    assert core.delete_memory("acme", theirs, viewer="bob") is False
    assert core.delete_memory("acme", theirs) is False  # no viewer: shared rows only
    assert core.delete_memory("acme", "mem:987654", viewer="bob") is False  # the same answer as a missing ref
    assert [r.ref for r in core.get_contents("acme", [theirs], viewer="alice").found] == [theirs]


def test_the_author_deletes_their_private_row(core: MemoryCore) -> None:
    mine = private(core)
    assert core.delete_memory("acme", mine, viewer="alice") is True
    assert core.get_contents("acme", [mine], viewer="alice").missing == [mine]


def test_any_agent_deletes_a_shared_row(core: MemoryCore) -> None:
    shared = core.add_memory("acme", "s", "alice", "shared").ref
    assert core.delete_memory("acme", shared, viewer="bob") is True


def test_the_operator_path_deletes_any_private_row(core: MemoryCore) -> None:
    theirs = private(core)
    assert core.delete_memory_as_operator("acme", theirs) is True
    assert core.get_contents("acme", [theirs], viewer="alice").missing == [theirs]
    assert core.delete_memory_as_operator("globex", core.add_memory("acme", "s", "a", "x").ref) is False


# ---- summaries -------------------------------------------------------------------------------
def test_a_session_summary_never_includes_points_at_or_counts_private_rows(core: MemoryCore) -> None:
    first = core.add_memory("acme", "s", "bob", "we deploy the canary on monday").ref
    private(core, content=f"{SECRET} early")
    last = core.add_memory("acme", "s", "bob", "the canary passed its checks").ref
    private(core, content=f"{SECRET} late")
    episode = core.summarize_session("acme", "s")
    assert SECRET not in episode.summary
    assert (episode.first_ref, episode.last_ref, episode.turn_count) == (first, last, 2)
    check = core.check_memory("acme", episode.ref, viewer="bob")  # type: ignore[arg-type]
    assert check.neighbours["covers"] == {"first": first, "last": last}
    assert check.neighbours["session"]["memories"] == 2


def test_a_private_write_leaves_the_cached_summary_as_it_was(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "bob", "a shared step")
    before = core.summarize_session("acme", "s")
    private(core)
    after = core.summarize_session("acme", "s")
    assert after.cached and after.ref == before.ref and after.summary == before.summary


def test_a_session_of_only_private_rows_has_nothing_to_summarize(core: MemoryCore) -> None:
    private(core, session="only-private")
    with pytest.raises(NotFoundError):
        core.summarize_session("acme", "only-private")
    with pytest.raises(NotFoundError):
        core.summarize_session("acme", "never-written")  # the same answer
    recovery = core.recover_context("acme", "only-private", viewer="bob")
    assert recovery.episode is None and recovery.turns.turns == [] and recovery.handoff is None


def test_recover_context_gives_another_agent_no_private_text_or_ref(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "bob", "shared turn about billing")
    secret = private(core)
    core.create_handoff("acme", "s", "alice", f"{SECRET} handoff", visibility="agent")
    recovery = core.recover_context("acme", "s", viewer="bob")
    assert recovery.handoff is None
    assert recovery.episode is not None and SECRET not in recovery.episode.summary
    assert secret not in (recovery.episode.first_ref, recovery.episode.last_ref)
    assert all(SECRET not in t.content for t in recovery.turns.turns)
    mine = core.recover_context("acme", "s", viewer="alice")
    assert mine.handoff is not None and SECRET in mine.handoff.content


# ---- neighbourhoods --------------------------------------------------------------------------
def test_check_memory_skips_private_neighbours_of_other_agents(core: MemoryCore) -> None:
    before = core.add_memory("acme", "s", "bob", "shared before").ref
    secret = private(core)
    target = core.add_memory("acme", "s", "bob", "shared target").ref
    private(core, content=f"{SECRET} after")
    after = core.add_memory("acme", "s", "bob", "shared after").ref
    seen = core.check_memory("acme", target, viewer="bob").neighbours
    assert (seen["previous"].ref, seen["next"].ref, seen["session"]["memories"]) == (before, after, 3)
    own = core.check_memory("acme", target, viewer="alice").neighbours
    assert (own["previous"].ref, own["session"]["memories"]) == (secret, 5)


def test_check_memory_lists_no_edge_to_another_agents_private_handoff(core: MemoryCore) -> None:
    shared = core.create_handoff("acme", "s", "bob", "shared handoff").ref
    secret = core.create_handoff("acme", "s", "alice", f"{SECRET} handoff", visibility="agent").ref
    assert secret not in {e["node"] for e in core.check_memory("acme", shared, viewer="bob").neighbours["edges"]}
    assert secret in {e["node"] for e in core.check_memory("acme", shared, viewer="alice").neighbours["edges"]}


def test_a_private_handoff_supersedes_its_authors_previous_private_handoff(core: MemoryCore) -> None:
    older = core.create_handoff("acme", "s", "alice", f"{SECRET} one", visibility="agent").ref
    newer = core.create_handoff("acme", "s", "alice", f"{SECRET} two", visibility="agent").ref
    edges = core.check_memory("acme", newer, viewer="alice").neighbours["edges"]
    assert {"direction": "out", "kind": "SUPERSEDES", "node": older} in edges
    shared = core.create_handoff("acme", "s", "bob", "shared handoff").ref
    assert all(e["kind"] != "SUPERSEDES" for e in core.check_memory("acme", shared, viewer="alice").neighbours["edges"])


def test_the_counts_a_viewer_sees_follow_deletes_and_reopen(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    core = open_core("persistent", tmp_path / "data", request)
    target = core.add_memory("acme", "s", "bob", "shared target").ref
    secrets = [private(core, content=f"{SECRET} {i}") for i in range(3)]
    core.add_memory("acme", "s", "carol", "carol's own", visibility="agent")

    def counts() -> tuple[int, int, int]:
        return tuple(core.check_memory("acme", target, viewer=v).neighbours["session"]["memories"]  # type: ignore[return-value]
                     for v in (None, "alice", "carol"))

    assert counts() == (1, 4, 2)
    assert core.delete_memory("acme", secrets[0], viewer="alice")
    assert counts() == (1, 3, 2)
    core.close()
    core = open_core("persistent", tmp_path / "data", request)
    try:
        assert counts() == (1, 3, 2)
    finally:
        core.close()
