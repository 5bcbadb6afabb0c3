"""The harness's JSON payload, read into one :class:`HookEvent`.

Claude Code hands every hook command a JSON object on stdin with ``session_id``,
``transcript_path``, ``cwd`` and ``hook_event_name``, plus fields of its own per event:
``source`` (SessionStart: startup, resume, clear, compact), ``trigger`` (PreCompact, PostCompact:
manual, auto), ``prompt`` (UserPromptSubmit), ``reason`` (SessionEnd). Any harness that sends the
same fields can use the same command (docs/harness.md). Fields this module does not know are
ignored; a payload that is not such an object is :class:`~memory_core.errors.InvalidInputError`
naming what is wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_core import validation as v
from memory_core.errors import InvalidInputError

MAX_PAYLOAD_BYTES = 4 << 20  # a prompt may hold a pasted file; a payload past this is not a harness's
SESSION_START = "SessionStart"
PRE_COMPACT = "PreCompact"
POST_COMPACT = "PostCompact"
STOP = "Stop"
SUBAGENT_STOP = "SubagentStop"
SESSION_END = "SessionEnd"
USER_PROMPT = "UserPromptSubmit"
EVENTS = frozenset({SESSION_START, PRE_COMPACT, POST_COMPACT, STOP, SUBAGENT_STOP, SESSION_END, USER_PROMPT})
MAX_PROMPT_CHARS = 20_000  # what a recall needs of a prompt; the rest is never read


@dataclass(frozen=True)
class HookEvent:
    """One lifecycle event of one harness session."""

    name: str  # one of EVENTS
    session: str
    transcript: Path | None = None
    cwd: str | None = None
    source: str | None = None  # SessionStart: startup | resume | clear | compact
    trigger: str | None = None  # PreCompact / PostCompact: manual | auto
    prompt: str | None = None  # UserPromptSubmit
    reason: str | None = None  # SessionEnd


def parse_payload(raw: bytes) -> HookEvent:
    """The event a payload describes; INVALID_INPUT (with ``field``) for anything else."""
    if len(raw) > MAX_PAYLOAD_BYTES:
        raise InvalidInputError(f"The hook payload holds more than {MAX_PAYLOAD_BYTES} bytes.", field="payload")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InvalidInputError(f"The hook payload is not JSON ({type(exc).__name__}).", field="payload") from None
    if not isinstance(data, dict):
        raise InvalidInputError("The hook payload must be a JSON object.", field="payload")
    name = data.get("hook_event_name")
    if not isinstance(name, str) or name not in EVENTS:
        known = ", ".join(sorted(EVENTS))
        raise InvalidInputError(f"'hook_event_name' must be one of {known}; got {_shown(name)}.",
                                field="hook_event_name")
    session = data.get("session_id")
    if not isinstance(session, str) or not v.NAME_PATTERN.match(session):
        raise InvalidInputError("'session_id' must be 1-128 printable characters without whitespace.",
                                field="session_id")
    transcript = _text(data, "transcript_path")
    prompt = _text(data, "prompt")
    return HookEvent(
        name=name, session=session, transcript=Path(transcript) if transcript else None, cwd=_text(data, "cwd"),
        source=_text(data, "source"), trigger=_text(data, "trigger"),
        prompt=prompt[:MAX_PROMPT_CHARS] if prompt is not None else None, reason=_text(data, "reason"),
    )


def _text(data: dict[str, Any], key: str) -> str | None:
    """A string field, None when absent or null; INVALID_INPUT when it is there and not a string."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"'{key}' must be a string.", field=key)
    return value or None


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=True) if value is not None else "nothing"
    return text if len(text) <= 40 else text[:37] + "..."
