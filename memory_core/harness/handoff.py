"""The handoff written before a compaction, built without a model from what capture stored.

:func:`build_handoff` reads the session's newest turns (as the store returns them, secrets
already redacted) and says, in a few capped lines each: the last user request, where the agent
stopped, the tasks still open, the decisions and the user's standing instructions, the files
edited and read, and the errors no later call fixed. Every line is taken from a stored row; none is
invented. Rows the poisoning scan flagged are left out (named by ref only), so the handoff itself is
never flagged for them and the block after a compaction still leads with it. With a model provider
configured, :func:`polish` asks it to rewrite that draft more tightly, and falls back to the draft
(saying why) when the model is absent, slow or failing — as the miniSummary does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from memory_core.harness.store import StoredRow
from memory_core.harness.tool_calls import EDITING_TOOLS, ERROR, OK, READING_TOOLS

if TYPE_CHECKING:
    from memory_core.provider.client import ModelClient

REQUEST_CHARS = 500
REPLY_CHARS = 300
LINE_CHARS = 160
MAX_DECISIONS = 6
MAX_ERRORS = 4
MAX_EDITED = 12
MAX_READ = 8
MAX_TASKS = 10
MAX_HANDOFF_CHARS = 4_000
HEADER = "Handoff (memory-core's hook, before a compaction, from the captured turns)"
_DECISION = re.compile(
    r"\b(decided|decision|going with|go with|went with|chose|choosing|opted|opt for|instead of|rather than|"
    r"switch(?:ed)? to|settled on|we should use|we'll use|will use)\b", re.IGNORECASE)
# a user's standing instruction: an imperative (``Always run …``, ``Don't …``, ``Please use …``) or a preference
_INSTRUCTION = re.compile(
    r"^(please\s+)?(always|never|don't|do not|make sure|avoid|use|prefer|keep|stop)\b|"
    r"\b(from now on|instead of|rather than|going forward)\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")


@dataclass(frozen=True)
class HandoffDraft:
    """A handoff's text and what it was built from."""

    text: str
    covers: str  # the newest row it read (its ref): the same rows make the same handoff
    last_request: str | None
    source: str = "hook"  # hook (no model) | model
    error: str | None = None  # why the model's version is not the one used


def build_handoff(rows_newest_first: Sequence[StoredRow], *, session: str) -> HandoffDraft | None:
    """The handoff for a session's captured turns; None when nothing was captured."""
    turns = [r for r in reversed(rows_newest_first) if r.type == "turn"]
    rows = [r for r in turns if not r.flags]  # instructions aimed at a model are never handed on
    if not rows:
        return None
    users = [r for r in rows if r.role == "user"]
    request = users[-1] if users else None
    after = rows[rows.index(request) + 1:] if request is not None else rows
    reply = next((r for r in reversed(after) if r.role == "assistant"), None)
    lines = [f"{HEADER}. Session {session}."]
    if request is not None:
        lines.append(f"Last request [{request.ref}]: {_cap(request.content, REQUEST_CHARS)}")
    if reply is not None:
        lines.append(f"Where it stopped [{reply.ref}]: {_cap(reply.content, REPLY_CHARS)}")
    tools = [r for r in rows if r.role == "tool"]
    _section(lines, "Open tasks", open_tasks(tools)[:MAX_TASKS])
    _section(lines, "Decisions and instructions", decisions(rows)[-MAX_DECISIONS:])
    edited, read = files_touched(tools)
    if edited:
        lines.append("Files edited: " + ", ".join(edited[:MAX_EDITED]))
    if read:
        lines.append("Files read: " + ", ".join(read[:MAX_READ]))
    _section(lines, "Errors not yet resolved", unresolved_errors(tools)[-MAX_ERRORS:])
    flagged = [r.ref for r in turns if r.flags]
    if flagged:
        lines.append(f"Left out, flagged by the poisoning scan: {', '.join(flagged[-MAX_READ:])}")
    text = "\n".join(lines)
    if len(text) > MAX_HANDOFF_CHARS:
        text = text[:MAX_HANDOFF_CHARS].rsplit("\n", 1)[0]
    return HandoffDraft(text, turns[-1].ref, request.content if request is not None else None)


def _section(lines: list[str], title: str, items: Sequence[str]) -> None:
    if items:
        lines.append(f"{title}:")
        lines.extend(f"- {item}" for item in items)


def open_tasks(tools: Sequence[StoredRow]) -> list[str]:
    """The tasks the task tools left open (oldest first): the newest full list, then each change after it."""
    tasks: dict[str, tuple[str, str]] = {}  # id or text -> (text, status)
    for row in tools:
        listed = row.metadata.get("tasks")
        if not isinstance(listed, list):
            continue
        if row.metadata.get("task_list"):
            tasks = {}
        for task in listed:
            if not isinstance(task, dict):
                continue
            text, status, task_id = str(task.get("text") or ""), str(task.get("status") or ""), task.get("id")
            key = str(task_id) if task_id else text
            known = tasks.get(key)
            tasks[key] = (text or (known[0] if known else f"task #{key}"), status or (known[1] if known else "pending"))
    return [_cap(f"{text} ({status})" if status != "pending" else text, LINE_CHARS)
            for text, status in tasks.values() if status not in ("completed", "deleted")]


def decisions(rows: Sequence[StoredRow]) -> list[str]:
    """Sentences where the agent decided something or the user set a rule (oldest first, each once)."""
    found: list[str] = []
    for row in rows:
        if row.role not in ("user", "assistant"):
            continue
        pattern = _INSTRUCTION if row.role == "user" else _DECISION
        for sentence in _SENTENCES.split(row.content):
            sentence = sentence.strip(" -*>#\t")
            if len(sentence) >= 12 and pattern.search(sentence):
                said = f"{'user' if row.role == 'user' else 'agent'} [{row.ref}]: {_cap(sentence, LINE_CHARS)}"
                if said not in found:
                    found.append(said)
    return found


def files_touched(tools: Sequence[StoredRow]) -> tuple[list[str], list[str]]:
    """The files edited, then the files only read, newest first, each once."""
    edited: list[str] = []
    read: list[str] = []
    for row in reversed(tools):
        target, tool = row.metadata.get("target"), row.metadata.get("tool")
        if not isinstance(target, str) or not target or row.metadata.get("outcome") != OK:
            continue
        if tool in EDITING_TOOLS and target not in edited:
            edited.append(target)
        elif tool in READING_TOOLS and target not in read:
            read.append(target)
    return edited, [path for path in read if path not in edited]


def unresolved_errors(tools: Sequence[StoredRow]) -> list[str]:
    """Failed calls (oldest first) that no later successful call of the same tool on the same target fixed."""
    last_ok: dict[tuple[Any, Any], int] = {}
    for i, row in enumerate(tools):
        if row.metadata.get("outcome") == OK:
            last_ok[(row.metadata.get("tool"), row.metadata.get("target"))] = i
    out: list[str] = []
    for i, row in enumerate(tools):
        key = (row.metadata.get("tool"), row.metadata.get("target"))
        if row.metadata.get("outcome") == ERROR and last_ok.get(key, -1) < i:
            out.append(f"[{row.ref}] {_cap(row.content, LINE_CHARS)}")
    return out


def _cap(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---- a model's version, fail-soft --------------------------------------------------------------
POLISH_PROMPT = (
    "Rewrite this handoff for the agent that continues the session after its context is compacted. "
    "Keep every file path, command, error, open task and [ref] exactly; drop nothing that is still open; "
    "do not add facts. Plain text, at most {chars} characters.\n\n{draft}"
)


def polish(draft: HandoffDraft, client: ModelClient | None, *, max_chars: int = MAX_HANDOFF_CHARS,
           max_tokens: int = 1_200) -> HandoffDraft:
    """The model's rewrite of ``draft`` when a client is given and answers well; else the draft,
    with the reason (``provider disabled``, a timeout, an empty answer) in ``error``."""
    from memory_core.provider.errors import EMPTY_RESPONSE, PROVIDER_DISABLED, ProviderError

    if client is None:
        return replace(draft, error=PROVIDER_DISABLED)

    def parse(content: Any) -> str:
        if not isinstance(content, str) or not content.strip():
            raise ProviderError(EMPTY_RESPONSE, transient=False)
        return content.strip()[:max_chars]

    messages = [{"role": "user", "content": POLISH_PROMPT.format(chars=max_chars, draft=draft.text)}]
    try:
        text = client.complete(messages, max_tokens=max_tokens, parse=parse)
    except ProviderError as exc:
        return replace(draft, error=exc.reason)
    return replace(draft, text=f"{HEADER.split(' (')[0]} (model-written from the hook's draft)\n{text}", source="model")
