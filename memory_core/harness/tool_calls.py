"""A tool call told in one short line: the tool, the argument that matters, the outcome.

``Bash `pytest -x` → error: FAILED tests/test_api.py::test_list (4,210 chars of output)``. What a
call wrote or read is never kept — not a file's contents, not an edit's strings, not a page —
only the path, command, pattern or address it was about, how it ended, and for a failure its
first and last lines, every part capped. Task-list tools (``TodoWrite``, ``TaskCreate``,
``TaskUpdate``) also leave their tasks, so a handoff can say which are still open.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memory_core.harness.transcript import ToolResult, ToolUse

OK, ERROR, NO_RESULT = "ok", "error", "no result"
WEB_TOOLS = frozenset({"WebFetch", "WebSearch"})
EDITING_TOOLS = frozenset({"Edit", "MultiEdit", "Write", "NotebookEdit"})
READING_TOOLS = frozenset({"Read"})
_PATH_KEYS = ("file_path", "notebook_path", "path")
_FALLBACK_KEYS = ("command", "file_path", "path", "url", "query", "pattern", "ref", "session", "name", "description")
_TASK_ID = re.compile(r"#(\d+)|\btask\s+(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class Task:
    """One entry of the agent's task list as a task tool left it."""

    text: str
    status: str  # pending | in_progress | completed | deleted
    id: str | None = None

    def to_dict(self) -> dict[str, str]:
        out = {"text": self.text, "status": self.status}
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True)
class ToolCall:
    """What capture keeps of one call."""

    name: str
    target: str  # the argument that matters, capped ("" when the tool has none)
    outcome: str  # ok | error | no result
    detail: str  # a failure's first and last lines, or a short note on the output; capped
    size: int  # characters of output
    tasks: tuple[Task, ...] = ()
    snapshot: bool = False  # ``tasks`` is the whole list (TodoWrite), not one change

    @property
    def provenance(self) -> str:
        """Where the call's words come from: ``web`` for fetched pages and searches, else ``tool``."""
        return "web" if self.name in WEB_TOOLS else "tool"

    def text(self) -> str:
        """The one line stored as the call's turn."""
        target = f" `{self.target}`" if self.target else ""
        detail = f": {self.detail}" if self.detail else ""
        size = f" ({self.size:,} chars of output)" if self.size > 200 else ""
        return f"{self.name}{target} → {self.outcome}{detail}{size}"

    def metadata(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.name, "outcome": self.outcome, "provenance": self.provenance}
        if self.target:
            out["target"] = self.target
        if self.tasks:
            out["tasks"] = [t.to_dict() for t in self.tasks]
            if self.snapshot:
                out["task_list"] = True
        return out


def describe(use: ToolUse, result: ToolResult | None, *, target_chars: int = 200,
             detail_chars: int = 240) -> ToolCall:
    """The short account of ``use`` and its ``result`` (None: none came)."""
    arguments = use.input
    outcome = NO_RESULT if result is None else ERROR if result.is_error else OK
    detail = ""
    if result is not None:
        detail = _failure(result.text, detail_chars) if result.is_error else _note(use.name, result, detail_chars)
    tasks, snapshot = _tasks(use, result, target_chars)
    return ToolCall(use.name, _cap(_target(use.name, arguments), target_chars), outcome, detail,
                    result.size if result is not None else 0, tasks, snapshot)


def _target(name: str, arguments: dict[str, Any]) -> str:
    text = _string(arguments, "command") if name == "Bash" else ""
    if name in ("Grep", "Glob"):
        pattern, where = _string(arguments, "pattern"), _string(arguments, "path")
        text = f"{pattern} in {where}" if pattern and where else pattern
    elif name == "WebFetch":
        text = _string(arguments, "url")
    elif name == "WebSearch":
        text = _string(arguments, "query")
    elif name in ("Agent", "Task"):
        text = _string(arguments, "description") or _string(arguments, "subagent_type")
    elif name == "TodoWrite":
        todos = arguments.get("todos")
        text = f"{len(todos)} tasks" if isinstance(todos, list) else ""
    elif name == "TaskCreate":
        text = _string(arguments, "subject")
    elif name == "TaskUpdate":
        status = _string(arguments, "status")
        text = f"#{_string(arguments, 'taskId')}" + (f" {status}" if status else "")
    elif name == "Skill":
        text = _string(arguments, "skill") or _string(arguments, "command")
    elif not text:
        text = next((found for key in _PATH_KEYS if (found := _string(arguments, key))), "")
        text = text or next((found for key in _FALLBACK_KEYS if (found := _string(arguments, key))), "")
    first, _, rest = text.strip().partition("\n")
    return first + (" …" if rest.strip() else "")


def _string(arguments: dict[str, Any], key: str) -> str:
    value = arguments.get(key)
    return value.strip() if isinstance(value, str) else ""


def _failure(text: str, limit: int) -> str:
    """A failure's first line and, when it says more, its last (where test runners put the verdict)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    told = lines[0] if len(lines) == 1 or lines[-1] == lines[0] else f"{lines[0]} … {lines[-1]}"
    return _cap(told, limit)


def _note(name: str, result: ToolResult, limit: int) -> str:
    """A successful call's output in a few words: how much came back, never what."""
    if name in READING_TOOLS or name in ("Grep", "Glob"):
        count = len([line for line in result.text.splitlines() if line.strip()])
        more = "+" if result.size > len(result.text) else ""
        return f"{count}{more} lines"
    if name == "Bash":
        first = next((line.strip() for line in result.text.splitlines() if line.strip()), "")
        return _cap(first, min(limit, 120))
    return ""


def _tasks(use: ToolUse, result: ToolResult | None, limit: int) -> tuple[tuple[Task, ...], bool]:
    arguments = use.input
    if use.name == "TodoWrite" and isinstance(arguments.get("todos"), list):
        return tuple(Task(_cap(str(t.get("content") or ""), limit), str(t.get("status") or "pending"))
                     for t in arguments["todos"] if isinstance(t, dict) and t.get("content")), True
    if use.name == "TaskCreate" and _string(arguments, "subject"):
        found = _TASK_ID.search(result.text) if result is not None and not result.is_error else None
        task_id = next((g for g in found.groups() if g), None) if found else None
        return (Task(_cap(_string(arguments, "subject"), limit), "pending", task_id),), False
    if use.name == "TaskUpdate" and _string(arguments, "taskId"):
        return (Task(_cap(_string(arguments, "subject"), limit), _string(arguments, "status") or "",
                     _string(arguments, "taskId")),), False
    return (), False


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"
