"""Model-backed miniSummary provider: a Protocol plus its implementation on the model client.

The client (:mod:`memory_core.provider.client`) imports litellm offline, bounds and retries each
call, and raises :class:`~memory_core.provider.errors.ProviderError` with a stable ``reason``; the
fail-soft decision (fall back to an extractive summary) belongs to
:mod:`memory_core.sessions.summary.service`, not here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from memory_core.provider.client import ModelClient, endpoint
from memory_core.provider.errors import EMPTY_RESPONSE, ProviderError
from memory_core.sessions.summary.text import normalize_space, trim_to_chars
from memory_core.settings.schema import ModelProviderSettings


@dataclass(frozen=True)
class SummaryTurn:
    """One turn as the summarizers see it: only what a summary needs, decoupled from storage rows."""

    agent: str
    role: str | None
    content: str
    timestamp: datetime | None = None
    type: str = "turn"

    @classmethod
    def from_row(cls, row: Any) -> SummaryTurn:
        """Build from any object with ``agent/role/content/timestamp/type`` attributes (e.g. MemoryRow)."""
        return cls(
            agent=row.agent, role=row.role, content=row.content, timestamp=row.timestamp, type=row.type
        )


@runtime_checkable
class SummaryProvider(Protocol):
    """Anything that turns a session's turns into a miniSummary.

    Implementations raise :class:`ProviderError` (or anything else; the service is fail-soft)
    when they cannot produce a summary. Turns are given oldest first.
    """

    def summarize(self, turns: Sequence[SummaryTurn], *, previous_handoff: str | None) -> str: ...


_SYSTEM_PROMPT = (
    "You write a miniSummary of an AI agent's working session so that the agent can resume after its "
    "context was compacted. Write plain text, at most {max_chars} characters, one or two sentences: "
    "the current goal, what was decided or done, and the next step. No preamble, no lists, no quotes."
)


def format_turns(turns: Sequence[SummaryTurn], previous_handoff: str | None, max_input_chars: int) -> str:
    """Render the prompt body, keeping the newest turns when the input budget is exceeded.

    The newest turns matter most after a compaction, so the oldest are dropped first; the handoff
    (already a summary) gets at most a quarter of the budget.
    """
    parts: list[str] = []
    budget = max_input_chars
    if previous_handoff and previous_handoff.strip():
        handoff = trim_to_chars(previous_handoff, max(1, max_input_chars // 4))
        parts.append(f"Latest handoff note:\n{handoff}\n")
        budget -= len(parts[0])
    lines: list[str] = []
    for turn in reversed(turns):
        stamp = turn.timestamp.isoformat(timespec="seconds") if turn.timestamp else "-"
        who = f"{turn.agent} ({turn.role})" if turn.role else turn.agent
        line = f"[{stamp}] {who} [{turn.type}]: {normalize_space(turn.content)}"
        if len(line) + 1 > budget:
            if not lines and budget > 40:  # always keep (a cut of) the newest turn
                lines.append(trim_to_chars(line, budget - 1))
            break
        lines.append(line)
        budget -= len(line) + 1
    parts.append("Turns, oldest first:\n" + "\n".join(reversed(lines)))
    return "\n".join(parts)


class LiteLLMSummaryProvider:
    """Summarize through the model provider's client (litellm), with bounded, transient-only retries."""

    def __init__(
        self,
        settings: ModelProviderSettings,
        *,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 1.0,
        backoff_jitter_s: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        self.client = ModelClient(endpoint(settings), backoff_initial_s=backoff_initial_s,
                                  backoff_max_s=backoff_max_s, backoff_jitter_s=backoff_jitter_s, sleep=sleep)

    def summarize(self, turns: Sequence[SummaryTurn], *, previous_handoff: str | None) -> str:
        """Return a summary of at most ``max_summary_chars``; raise ProviderError on failure."""
        s = self.settings
        messages = [
            {"role": "system", "content": _SYSTEM_PROMPT.format(max_chars=s.max_summary_chars)},
            {"role": "user", "content": format_turns(turns, previous_handoff, s.max_input_chars)},
        ]
        # ~3 chars per token plus slack; the hard cap is enforced by trimming anyway
        return self.client.complete(messages, max_tokens=max(32, s.max_summary_chars // 2),
                                    parse=lambda content: trim_to_chars(_summary_text(content), s.max_summary_chars))


def _summary_text(content: Any) -> str:
    """The summary in a completion's content; blank or not text is EMPTY_RESPONSE."""
    if not isinstance(content, str) or not content.strip():
        raise ProviderError(EMPTY_RESPONSE, transient=False)
    # Models like to wrap a one-liner in quotes; strip them so the cap is spent on content.
    text = normalize_space(content).strip("\"'“”")
    if not text:
        raise ProviderError(EMPTY_RESPONSE, transient=False)
    return text


__all__ = [
    "LiteLLMSummaryProvider",
    "SummaryProvider",
    "SummaryTurn",
    "format_turns",
]
