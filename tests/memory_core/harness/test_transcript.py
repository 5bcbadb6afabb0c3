"""Reading a transcript incrementally: complete lines only, bookkeeping skipped, nothing read twice."""

from __future__ import annotations

import json
from pathlib import Path

from memory_core.harness.transcript import Compacted, Said, ToolResult, ToolUse, entries, read_from
from tests.support.claude_transcript import Transcript

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "claude_code" / "session.jsonl"


def everything(path: Path, offset: int = 0) -> list[object]:
    chunk = read_from(path, offset)
    return [e for line in chunk.lines for e in entries(line)]


def test_a_partial_last_line_is_left_for_the_next_read(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("first")
    t.line({"type": "user", "uuid": "u2", "message": {"role": "user", "content": "second"}}, newline=False)
    chunk = read_from(t.path, 0)
    assert [e.text for line in chunk.lines for e in entries(line) if isinstance(e, Said)] == ["first"]
    t.raw("\n")
    later = read_from(t.path, chunk.end)
    assert [e.text for line in later.lines for e in entries(line) if isinstance(e, Said)] == ["second"]
    assert read_from(t.path, later.end).lines == []


def test_bookkeeping_meta_and_compaction_lines_are_not_conversation(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.bookkeeping()
    t.prompt("<system-reminder>\nnoise\n</system-reminder>\nfix the build")
    t.thinking("hmm")
    t.reply("On it.")
    t.compact_echo()
    t.prompt("[Request interrupted by user]")
    found = everything(t.path)
    assert [(type(e).__name__, getattr(e, "text", None)) for e in found] == [
        ("Said", "fix the build"), ("Said", "On it."), ("Compacted", None)]


def test_tool_calls_and_results_are_read_with_their_size(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    tool_id = t.tool("Read", {"file_path": "/w/a.py"}, "x" * 10_000)
    found = everything(t.path)
    use, result = found
    assert isinstance(use, ToolUse) and use.id == tool_id and use.input == {"file_path": "/w/a.py"}
    assert isinstance(result, ToolResult) and result.size == 10_000 and len(result.text) == 2_000


def test_malformed_lines_are_counted_and_skipped(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.raw("{not json\n[1,2]\n\n")
    t.prompt("after the garbage")
    chunk = read_from(t.path, 0)
    assert chunk.malformed == 2
    assert [e.text for line in chunk.lines for e in entries(line) if isinstance(e, Said)] == ["after the garbage"]


def test_an_offset_past_the_end_reads_a_rewritten_file_from_the_start(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("only line")
    chunk = read_from(t.path, 10_000)
    assert chunk.begin == 0 and len(chunk.lines) == 1


def test_one_line_longer_than_the_read_budget_is_read_whole(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.tool("Bash", {"command": "cat big"}, "y" * 50_000)
    chunk = read_from(t.path, 0, max_bytes=1_000)
    assert len(chunk.lines) >= 1 and all(line.data is not None for line in chunk.lines)


def test_unicode_and_invalid_utf8_do_not_stop_the_reader(tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("日本語 🎉 ünïcødé")
    with t.path.open("ab") as f:
        f.write(b'{"type": "user", "uuid": "bad", "message": {"role": "user", "content": "bad \xff byte"}}\n')
    texts = [e.text for e in everything(t.path) if isinstance(e, Said)]
    assert texts[0] == "日本語 🎉 ünïcødé" and texts[1].startswith("bad ")


def test_plain_role_content_lines_are_read_for_other_harnesses(tmp_path: Path) -> None:
    path = tmp_path / "plain.jsonl"
    path.write_text(json.dumps({"role": "user", "content": "hi", "id": "p1"}) + "\n"
                    + json.dumps({"role": "assistant", "content": "hello"}) + "\n")
    found = everything(path)
    assert [(e.role, e.line) for e in found if isinstance(e, Said)] == [("user", "p1"), ("assistant", "@46")]


def test_the_recorded_claude_code_session_reads_as_its_conversation() -> None:
    found = everything(FIXTURE)
    said = [e for e in found if isinstance(e, Said)]
    uses = [e for e in found if isinstance(e, ToolUse)]
    results = [e for e in found if isinstance(e, ToolResult)]
    assert said[0].role == "user" and said[0].text.startswith("please RUN_BASH")
    assert {u.id for u in uses} == {r.tool_use_id for r in results} and uses
    assert any(isinstance(e, Compacted) for e in found)
    assert all("Caveat" not in s.text and "<command-name>" not in s.text for s in said)
