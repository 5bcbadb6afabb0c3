"""``own_only``: what a write-scoped connection may change, through the library.

Only rows its acting agent wrote; another agent's shared row is SCOPE_DENIED and left as it
was; another agent's *private* row still reads as missing (the refusal must not reveal it).
"""

from __future__ import annotations

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError, ScopeDeniedError


def test_another_agents_shared_row_is_refused_and_left_unchanged(core: MemoryCore) -> None:
    theirs = core.add_memory("acme", "s", "alice", "alice's shared decision").ref
    with pytest.raises(ScopeDeniedError) as refused:
        core.delete_memory("acme", theirs, viewer="bob", own_only=True)
    assert refused.value.fields == {"ref": theirs, "scope": "write", "needed": "admin"}
    with pytest.raises(ScopeDeniedError):
        core.update_memory("acme", theirs, content="bob's version", agent="bob", own_only=True)
    for change in (core.lock_memory, core.unlock_memory):
        with pytest.raises(ScopeDeniedError):
            change("acme", theirs, viewer="bob", own_only=True)
    row = core.check_memory("acme", theirs).memory
    assert (row.content, row.locked, row.valid_to) == ("alice's shared decision", False, None)
    assert core.history("acme", theirs) == [row]


def test_a_call_that_names_no_agent_owns_nothing(core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s", "alice", "a shared note").ref
    with pytest.raises(ScopeDeniedError, match="name yourself as 'viewer'"):
        core.delete_memory("acme", ref, own_only=True)
    with pytest.raises(ScopeDeniedError, match="name yourself as 'viewer'"):
        core.lock_memory("acme", ref, own_only=True)
    assert core.get_contents("acme", [ref]).missing == []


def test_the_acting_agents_own_rows_change_as_without_the_restriction(core: MemoryCore) -> None:
    mine = core.add_memory("acme", "s", "bob", "bob's note").ref
    private = core.add_memory("acme", "s", "bob", "bob's scratch", visibility="agent").ref
    assert core.lock_memory("acme", mine, viewer="bob", own_only=True) is True
    assert core.unlock_memory("acme", mine, viewer="bob", own_only=True) is True
    newer = core.update_memory("acme", mine, content="bob's better note", agent="bob", own_only=True)
    assert newer.supersedes == mine
    assert core.delete_memory("acme", newer.added.ref, viewer="bob", own_only=True) is True
    assert core.delete_memory("acme", private, viewer="bob", own_only=True) is True


def test_another_agents_private_row_reads_as_missing_not_as_refused(core: MemoryCore) -> None:
    secret = core.add_memory("acme", "s", "alice", "alice's scratch", visibility="agent").ref
    assert core.delete_memory("acme", secret, viewer="bob", own_only=True) is False
    with pytest.raises(NotFoundError):
        core.update_memory("acme", secret, content="x", agent="bob", own_only=True)
    with pytest.raises(NotFoundError):
        core.lock_memory("acme", secret, viewer="bob", own_only=True)
    assert core.get_contents("acme", [secret], viewer="alice").missing == []


def test_the_library_default_and_the_operator_change_anyones_rows(core: MemoryCore) -> None:
    theirs = core.add_memory("acme", "s", "alice", "alice's shared note").ref
    assert core.lock_memory("acme", theirs, viewer="bob") is True  # the library's callers are trusted
    assert core.set_lock_as_operator("acme", theirs, False) is True
    assert core.delete_memory("acme", theirs, viewer="bob") is True
