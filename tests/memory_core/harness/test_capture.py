"""Capture: keys from the transcript's own ids, tool calls paired with their results, caps."""

from __future__ import annotations

from pathlib import Path

from memory_core.harness.capture import Capture, Limits
from memory_core.harness.transcript import entries, read_from
from tests.support.claude_transcript import Transcript


def captured(t: Transcript, *, final: bool = False, limits: Limits | None = None) -> Capture:
    capture = Capture(t.session, limits or Limits())
    for line in read_from(t.path, 0).lines:
        capture.feed(entries(line))
    if final:
        capture.settle()
    return capture


def test_rows_keep_the_conversation_order_with_roles_and_provenance(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("run the tests")
    t.reply("Running them.")
    t.tool("Bash", {"command": "pytest"}, "2 passed")
    rows = captured(t).rows
    assert [(r.role, r.metadata["provenance"]) for r in rows] == [("user", "user"), ("assistant", "agent"),
                                                                   ("tool", "tool")]
    assert rows[2].content == "Bash `pytest` → ok: 2 passed"


def test_keys_are_the_same_whenever_the_transcript_is_read(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("a")
    t.tool("Read", {"file_path": "/a"}, "x")
    first, second = captured(t).rows, captured(t).rows
    assert [r.key for r in first] == [r.key for r in second]
    assert len({r.key for r in first}) == 2 and all(r.key.startswith(f"claude-code:{t.session}:") for r in first)


def test_a_call_waits_for_its_result_and_holds_the_offset_at_its_line(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("go")
    t.call("Bash", {"command": "make"})
    capture = captured(t)
    assert [r.role for r in capture.rows] == ["user"]
    assert capture.hold_from() is not None and capture.hold_from() > 0


def test_a_new_prompt_settles_calls_that_never_got_a_result(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.call("Bash", {"command": "make"})
    t.prompt("never mind")
    rows = captured(t).rows
    assert rows[0].content == "Bash `make` → no result" and rows[1].role == "user"


def test_the_end_of_the_session_settles_what_is_pending(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.call("Bash", {"command": "make"})
    capture = captured(t, final=True)
    assert capture.hold_from() is None and capture.rows[0].content.endswith("no result")


def test_a_huge_turn_is_capped_and_says_how_much_was_left_out(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("here is the log:\n" + "log line\n" * 10_000)
    row = captured(t, limits=Limits(turn_chars=1000)).rows[0]
    assert len(row.content) < 1100 and "more characters not captured" in row.content


def test_huge_tool_output_is_never_stored(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.tool("Bash", {"command": "cat dump.sql"}, "INSERT INTO users VALUES (1);\n" * 100_000)
    row = captured(t).rows[0]
    assert len(row.content) < 400 and "3,000,000 chars of output" in row.content
