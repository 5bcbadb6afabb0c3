"""Transcript entries turned into the ``turn`` rows capture stores, each with a key of its own.

A row's idempotency key comes from the transcript's own identity of what it records — the
line's ``uuid`` for a prompt or a reply, the call's id for a tool call — so capturing the same
transcript again, or again after a crash at any point, stores nothing twice whatever the saved
offset says. Prompts are ``role: user`` (provenance ``user``), replies ``role: assistant``
(``agent``), tool calls ``role: tool`` (``tool``, or ``web`` for fetched pages and searches),
told in one capped line by :mod:`memory_core.harness.tool_calls`.

A tool call is stored once its result is read; until then it is *pending*, and the reader's
offset is not moved past its line (:class:`Capture` reports the earliest such line). A new
prompt, or the end of the session, settles the calls still pending as ``no result``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from memory_core.harness.tool_calls import describe
from memory_core.harness.transcript import Compacted, Entry, Said, ToolResult, ToolUse
from memory_core.models import PROVENANCES

HARNESS = "claude-code"
PROVENANCE = {"user": "user", "assistant": "agent"}


@dataclass(frozen=True)
class Limits:
    """How much of a turn is kept (the rest is named, not stored)."""

    turn_chars: int = 8_000
    target_chars: int = 200
    detail_chars: int = 240


@dataclass(frozen=True)
class CapturedRow:
    """One row to store in the session; ``start`` is the byte offset of the line it must be read from."""

    key: str
    role: str  # user | assistant | tool
    content: str
    at: str | None
    metadata: dict[str, Any]
    start: int

    @property
    def provenance(self) -> str | None:
        """Where its words come from, stored as the memory's ``provenance`` (``user`` for prompts, ``agent``
        for replies, ``tool`` or ``web`` for a call); None: the store's default by role."""
        value = self.metadata.get("provenance")
        return value if value in PROVENANCES else None


@dataclass
class Capture:
    """Rows read from a stretch of transcript, and the tool calls still waiting for their results."""

    session: str
    limits: Limits = field(default_factory=Limits)
    rows: list[CapturedRow] = field(default_factory=list)
    pending: dict[str, ToolUse] = field(default_factory=dict)
    compacted: int = 0  # compaction boundaries read

    def feed(self, items: Iterable[Entry]) -> None:
        """Add what ``items`` hold (in transcript order)."""
        for item in items:
            if isinstance(item, Said):
                if item.role == "user":
                    self.settle()  # a new prompt: the calls of the turn before will get no result
                self._said(item)
            elif isinstance(item, ToolUse):
                self.pending[item.id] = item
            elif isinstance(item, ToolResult):
                use = self.pending.pop(item.tool_use_id, None)
                if use is not None:
                    self._called(use, item)
            elif isinstance(item, Compacted):
                self.compacted += 1

    def settle(self) -> None:
        """Store every pending call as ``no result`` (a new prompt came, or the session ended)."""
        for use in list(self.pending.values()):
            self._called(use, None)
        self.pending.clear()

    def hold_from(self) -> int | None:
        """The earliest line a pending call was read from: the next read must start there (None: none)."""
        return min((use.start for use in self.pending.values()), default=None)

    def _said(self, item: Said) -> None:
        text = item.text
        cap = self.limits.turn_chars
        if len(text) > cap:
            text = f"{text[:cap].rstrip()}\n[… {len(item.text) - cap:,} more characters not captured]"
        metadata = {"harness": HARNESS, "line": item.line, "provenance": PROVENANCE.get(item.role, "agent")}
        self.rows.append(CapturedRow(self._key(item.line), item.role, text, item.at, metadata, item.start))

    def _called(self, use: ToolUse, result: ToolResult | None) -> None:
        call = describe(use, result, target_chars=self.limits.target_chars, detail_chars=self.limits.detail_chars)
        metadata = {"harness": HARNESS, "line": use.line, **call.metadata()}
        self.rows.append(CapturedRow(self._key(use.id), "tool", call.text(), use.at, metadata, use.start))

    def _key(self, identity: str) -> str:
        return f"{HARNESS}:{self.session}:{identity}"
