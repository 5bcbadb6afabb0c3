"""A harness's JSONL transcript, read from where the last read stopped.

:func:`read_from` returns the complete lines after a byte offset and the offset after the last
of them: a last line still being written (no newline yet) is left for the next read, so a
transcript that is being appended to is never read half. :func:`entries` turns one line into what
capture keeps; everything else a harness writes for its own bookkeeping reads as nothing.

Claude Code's format (one JSON object a line, each with a ``uuid``): ``user`` lines hold the
user's prompt (a string, or content blocks) or the results of tool calls (``tool_result``
blocks); ``assistant`` lines hold one reply block each (``text``, ``tool_use``, ``thinking``);
``system`` lines with ``subtype: compact_boundary`` mark a compaction. Queue operations,
attachments (hook output, listings), snapshots, the ``/compact`` command's echo, meta and
sidechain (sub-agent) lines, and the summary that replaces a compacted conversation are not the
conversation and are skipped. A plain ``{"role", "content", "id"?}`` line is read too, for a
harness that writes no more than that.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RESULT_KEEP_CHARS = 2_000  # what is kept of a tool's output: its first lines tell the outcome
_BOOKKEEPING_PREFIXES = ("<command-name>", "<command-message>", "<local-command-stdout>", "<local-command-stderr>",
                         "<local-command-caveat>", "<bash-input>", "<bash-stdout>", "<bash-stderr>",
                         "[Request interrupted by user", "Caveat: The messages below were generated")
_SYSTEM_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)


@dataclass(frozen=True)
class Line:
    """One complete line: where it starts, and its JSON object (None when it is not one)."""

    start: int
    data: dict[str, Any] | None


@dataclass(frozen=True)
class Chunk:
    """The complete lines after an offset; ``end`` is the offset after the last of them."""

    lines: list[Line]
    begin: int  # where the read started (0 when the file was shorter than the offset asked for)
    end: int
    size: int  # the file's size when it was read
    identity: tuple[int, int]  # (device, inode): a transcript replaced by another file starts over
    malformed: int = 0  # complete lines that were not JSON objects (skipped)


@dataclass(frozen=True)
class Said:
    """A user's prompt or an assistant's reply."""

    role: str  # "user" | "assistant"
    line: str  # the line's identity in the transcript (its uuid)
    text: str
    at: str | None  # the line's timestamp (ISO 8601), when it has one
    start: int = 0  # the line's byte offset


@dataclass(frozen=True)
class ToolUse:
    """An assistant's call of a tool (its result comes in a later line)."""

    line: str
    id: str
    name: str
    input: dict[str, Any]
    at: str | None
    start: int = 0


@dataclass(frozen=True)
class ToolResult:
    """What a tool call returned: whether it failed, its output's first characters and full size."""

    tool_use_id: str
    is_error: bool
    text: str  # at most RESULT_KEEP_CHARS
    size: int  # characters of the whole output
    at: str | None
    start: int = 0


@dataclass(frozen=True)
class Compacted:
    """The harness compacted the conversation here."""

    line: str
    at: str | None
    start: int = 0


Entry = Said | ToolUse | ToolResult | Compacted


def identity_of(path: Path) -> tuple[int, int] | None:
    """The file's (device, inode), None when it is missing."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


def read_from(path: Path, offset: int, *, max_bytes: int = 16 << 20) -> Chunk:
    """The complete lines from ``offset`` on, about ``max_bytes`` of them (always at least one
    whole line when there is one, however long); OSError when the file cannot be read.

    An ``offset`` past the end (the file was truncated or rewritten) reads from the start.
    """
    with open(path, "rb") as f:
        info = os.fstat(f.fileno())
        if offset > info.st_size or offset < 0:
            offset = 0
        f.seek(offset)
        data = f.read(max_bytes)
        cut = data.rfind(b"\n")
        while cut < 0 and len(data) >= max_bytes:  # one line longer than the budget: read it whole
            more = f.read(max_bytes)
            if not more:
                break
            data += more
            cut = data.rfind(b"\n")
    lines: list[Line] = []
    malformed = 0
    position = offset
    for raw in data[: cut + 1].split(b"\n")[:-1] if cut >= 0 else []:
        start, position = position, position + len(raw) + 1
        if not raw.strip():
            continue
        parsed = _object(raw)
        if parsed is None:
            malformed += 1
        lines.append(Line(start, parsed))
    end = offset + cut + 1 if cut >= 0 else offset
    return Chunk(lines, offset, end, max(info.st_size, end), (info.st_dev, info.st_ino), malformed)


def _object(raw: bytes) -> dict[str, Any] | None:
    try:
        value = json.loads(raw.decode("utf-8", "replace"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def entries(line: Line) -> list[Entry]:
    """What one line holds of the conversation, in order (nothing for bookkeeping lines)."""
    data = line.data
    if data is None:
        return []
    kind = data.get("type")
    if kind is None and data.get("role") in ("user", "assistant"):
        return list(_plain(data, line.start))
    if kind == "system" and data.get("subtype") == "compact_boundary":
        return [Compacted(str(data.get("uuid") or f"@{line.start}"), _at(data), line.start)]
    if kind not in ("user", "assistant") or _skipped(data):
        return []
    message = data.get("message")
    uuid = data.get("uuid")
    if not isinstance(message, dict) or not isinstance(uuid, str) or not uuid:
        return []
    at = _at(data)
    content = message.get("content")
    if kind == "user":
        return list(_user(uuid, content, at, line.start, data))
    if message.get("model") == "<synthetic>":  # the harness's own stand-in reply (an API error, a cancel)
        return []
    return list(_assistant(uuid, content, at, line.start))


def _skipped(data: dict[str, Any]) -> bool:
    return bool(data.get("isMeta") or data.get("isSidechain") or data.get("isCompactSummary")
                or data.get("isVisibleInTranscriptOnly") or data.get("isApiErrorMessage"))


def _at(data: dict[str, Any]) -> str | None:
    at = data.get("timestamp")
    return at if isinstance(at, str) else None


def _user(uuid: str, content: Any, at: str | None, start: int, data: dict[str, Any]) -> Iterator[Entry]:
    if isinstance(content, str):
        text = _prompt_text(content)
        if text:
            yield Said("user", uuid, text, at, start)
        return
    if not isinstance(content, list):
        return
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
            text, size = _result_text(block.get("content"))
            yield ToolResult(block["tool_use_id"], bool(block.get("is_error")), text, size, at, start)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif block.get("type") == "image":
            texts.append("[image]")
    text = _prompt_text("\n".join(texts))
    if text:
        yield Said("user", uuid, text, at, start)


def _prompt_text(text: str) -> str:
    """A prompt without the harness's reminders; empty for the harness's own command echoes."""
    text = _SYSTEM_REMINDER.sub("", text).strip()
    return "" if text.startswith(_BOOKKEEPING_PREFIXES) else text


def _assistant(uuid: str, content: Any, at: str | None, start: int) -> Iterator[Entry]:
    if isinstance(content, str):
        if content.strip():
            yield Said("assistant", uuid, content.strip(), at, start)
        return
    if not isinstance(content, list):
        return
    texts: list[str] = []
    for block in content:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"].strip():
            texts.append(block["text"].strip())
        elif block.get("type") == "tool_use" and isinstance(block.get("id"), str) and isinstance(
                block.get("name"), str):
            arguments = block.get("input")
            yield ToolUse(uuid, block["id"], block["name"], arguments if isinstance(arguments, dict) else {}, at, start)
    if texts:
        yield Said("assistant", uuid, "\n\n".join(texts), at, start)


def _result_text(content: Any) -> tuple[str, int]:
    """A tool result's text (its first RESULT_KEEP_CHARS) and its full length."""
    if isinstance(content, str):
        return content[:RESULT_KEEP_CHARS], len(content)
    if not isinstance(content, list):
        return "", 0
    parts: list[str] = []
    size = 0
    for block in content:
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
            size += len(block["text"])
        elif isinstance(block, dict) and block.get("type") == "image":
            parts.append("[image]")
    return "\n".join(parts)[:RESULT_KEEP_CHARS], size


def _plain(data: dict[str, Any], start: int) -> Iterator[Entry]:
    """``{"role", "content", "id"?, "timestamp"?}``: a harness that writes plain turns."""
    content = data.get("content")
    if not isinstance(content, str) or not content.strip():
        return
    identity = data.get("id")
    line = identity if isinstance(identity, str) and identity else f"@{start}"
    yield Said(str(data["role"]), line, content.strip(), _at(data), start)
