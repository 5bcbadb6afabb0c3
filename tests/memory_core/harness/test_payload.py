"""The harness's payload read into a HookEvent, and every malformed payload refused with a field."""

from __future__ import annotations

import json

import pytest

from memory_core.errors import InvalidInputError
from memory_core.harness.payload import MAX_PAYLOAD_BYTES, MAX_PROMPT_CHARS, parse_payload

# recorded from Claude Code 2.1.197 (paths shortened)
RECORDED = [
    {"session_id": "22e87180-c2a9-4ebc-8cd1-93c55bec3a0c", "transcript_path": "/h/.claude/projects/p/22e.jsonl",
     "cwd": "/tmp/proj", "hook_event_name": "SessionStart", "source": "startup"},
    {"session_id": "22e87180-c2a9-4ebc-8cd1-93c55bec3a0c", "transcript_path": "/h/.claude/projects/p/22e.jsonl",
     "cwd": "/tmp/proj", "prompt_id": "e09a1136", "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
     "prompt": "hello there"},
    {"session_id": "22e87180-c2a9-4ebc-8cd1-93c55bec3a0c", "transcript_path": "/h/.claude/projects/p/22e.jsonl",
     "cwd": "/tmp/proj", "hook_event_name": "Stop", "stop_hook_active": False, "last_assistant_message": "Done.",
     "effort": {"level": "high"}, "background_tasks": []},
    {"session_id": "2e0dfc92", "transcript_path": "/h/t.jsonl", "cwd": "/tmp/proj", "hook_event_name": "PreCompact",
     "trigger": "manual", "custom_instructions": None},
    {"session_id": "2e0dfc92", "transcript_path": "/h/t.jsonl", "cwd": "/tmp/proj", "hook_event_name": "SessionEnd",
     "reason": "other"},
]


@pytest.mark.parametrize("data", RECORDED, ids=[d["hook_event_name"] for d in RECORDED])
def test_recorded_claude_code_payloads_parse(data: dict[str, object]) -> None:
    event = parse_payload(json.dumps(data).encode())
    assert event.name == data["hook_event_name"]
    assert event.session == data["session_id"]
    assert str(event.transcript) == data["transcript_path"]
    assert event.cwd == "/tmp/proj"
    assert event.source == data.get("source") and event.trigger == data.get("trigger")
    assert event.prompt == data.get("prompt") and event.reason == data.get("reason")


@pytest.mark.parametrize(("raw", "field"), [
    (b"", "payload"),
    (b"garbage \x00\xff", "payload"),
    (b"[1, 2]", "payload"),
    (b'{"session_id": "s"}', "hook_event_name"),
    (b'{"hook_event_name": "Sneeze", "session_id": "s"}', "hook_event_name"),
    (b'{"hook_event_name": "Stop"}', "session_id"),
    (b'{"hook_event_name": "Stop", "session_id": "has space"}', "session_id"),
    (b'{"hook_event_name": "Stop", "session_id": "s", "transcript_path": 7}', "transcript_path"),
    (b'{"hook_event_name": "Stop", "session_id": "s", "cwd": ["x"]}', "cwd"),
])
def test_a_malformed_payload_is_refused_naming_the_field(raw: bytes, field: str) -> None:
    with pytest.raises(InvalidInputError) as caught:
        parse_payload(raw)
    assert caught.value.fields["field"] == field


def test_a_payload_past_the_size_limit_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(InvalidInputError):
        parse_payload(b" " * (MAX_PAYLOAD_BYTES + 1))


def test_unicode_survives_and_a_huge_prompt_is_cut_to_what_a_recall_reads() -> None:
    data = {"hook_event_name": "UserPromptSubmit", "session_id": "s", "prompt": "ünïcødé 🎉 " + "x" * 50_000}
    event = parse_payload(json.dumps(data, ensure_ascii=False).encode())
    assert event.prompt is not None and event.prompt.startswith("ünïcødé 🎉")
    assert len(event.prompt) == MAX_PROMPT_CHARS


def test_empty_strings_read_as_absent() -> None:
    event = parse_payload(b'{"hook_event_name": "Stop", "session_id": "s", "transcript_path": "", "cwd": ""}')
    assert event.transcript is None and event.cwd is None
