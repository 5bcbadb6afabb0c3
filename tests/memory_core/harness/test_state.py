"""Hook state on disk: private, atomic, per binding, and forgiving of a damaged file."""

from __future__ import annotations

import stat
from pathlib import Path

from memory_core.harness.state import SessionState, StateStore


def test_state_round_trips_and_is_private(tmp_path: Path) -> None:
    states = StateStore(tmp_path)
    with states.locked("acme", "claude-code", "s1") as state:
        state.offset, state.sent, state.project = 120, ["k1"], "/w/p"
        states.save("acme", "claude-code", "s1", state)
    path = states.path("acme", "claude-code", "s1")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "s1" not in path.name  # a session id never becomes a path
    with states.locked("acme", "claude-code", "s1") as again:
        assert (again.offset, again.sent, again.project) == (120, ["k1"], "/w/p")


def test_another_tenant_or_agent_has_its_own_state(tmp_path: Path) -> None:
    states = StateStore(tmp_path)
    with states.locked("acme", "a", "s1") as state:
        state.offset = 99
        states.save("acme", "a", "s1", state)
    for tenant, agent in (("other", "a"), ("acme", "b")):
        with states.locked(tenant, agent, "s1") as theirs:
            assert theirs.offset == 0


def test_a_damaged_state_file_reads_as_a_fresh_start(tmp_path: Path) -> None:
    states = StateStore(tmp_path)
    path = states.path("acme", "a", "s1")
    path.parent.mkdir(parents=True)
    path.write_text('{"offset": "not a number", "sent": [1, {"x": 2}], "project": 7}')
    with states.locked("acme", "a", "s1") as state:
        assert state == SessionState()
    path.write_text("garbage")
    with states.locked("acme", "a", "s1") as state:
        assert state.offset == 0


def test_a_compaction_forgets_what_was_injected_before_it() -> None:
    state = SessionState()
    state.note_injected(["mem:1", "mem:2"])
    state.note_injected(["mem:2", "mem:3"])
    assert state.injected == ["mem:1", "mem:2", "mem:3"] and state.injections == 2
    state.note_compaction()
    assert state.injected == [] and state.compactions == 1
