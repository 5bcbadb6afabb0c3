"""Model-backed miniSummary provider: a Protocol plus its litellm implementation.

litellm is heavy (seconds to import) and, left to its defaults, reaches for the network on import
(remote model-cost map, beta-header catalogue). It is therefore imported lazily, once, the first
time a summary is actually requested, after its offline switches are set. ``import memory_core``
never imports it.

Failures are translated into :class:`SummaryProviderError` carrying a short, stable ``reason``
(see :mod:`memory_core.sessions.summary.errors`) and whether the failure is transient. tenacity retries
only the transient ones; the fail-soft decision (fall back to an extractive summary) belongs to
:mod:`memory_core.sessions.summary.service`, not here.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from tenacity import (
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    stop_before_delay,
    wait_exponential_jitter,
)

from memory_core.sessions.summary.errors import (
    EMPTY_RESPONSE,
    LITELLM_UNAVAILABLE,
    MALFORMED_RESPONSE,
    SummaryProviderError,
    classify_exception,
    provider_exception_types,
)
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

    Implementations raise :class:`SummaryProviderError` (or anything else; the service is fail-soft)
    when they cannot produce a summary. Turns are given oldest first.
    """

    def summarize(self, turns: Sequence[SummaryTurn], *, previous_handoff: str | None) -> str: ...


# Set before litellm is imported. OFFLINE_MODE is the umbrella switch in litellm >= 1.80; the
# LOCAL_* variables cover the catalogues that older code paths check individually.
_OFFLINE_ENV: dict[str, str] = {
    "LITELLM_OFFLINE_MODE": "true",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
}
_litellm: ModuleType | None = None
_litellm_lock = threading.Lock()

# Local servers (ollama, vLLM, llama.cpp) accept any key, but the OpenAI client refuses to start
# without one, so a placeholder keeps key-less setups working.
_DUMMY_API_KEY = "sk-no-key-required"

_SYSTEM_PROMPT = (
    "You write a miniSummary of an AI agent's working session so that the agent can resume after its "
    "context was compacted. Write plain text, at most {max_chars} characters, one or two sentences: "
    "the current goal, what was decided or done, and the next step. No preamble, no lists, no quotes."
)


def load_litellm() -> ModuleType:
    """Import litellm once, in offline mode, and quiet its stdout chatter; thread-safe."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _litellm_lock:
        if _litellm is None:
            # Forced rather than setdefault: the spec says nothing may reach the network on import.
            os.environ.update(_OFFLINE_ENV)
            import litellm

            # litellm prints "Give Feedback / Get Help" banners to stdout on every error; an MCP stdio
            # server must never write to stdout, and our reasons already say what went wrong.
            litellm.suppress_debug_info = True
            litellm.disable_hf_tokenizer_download = True
            _litellm = litellm
    return _litellm


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
    """Summarize through ``litellm.completion`` with bounded, transient-only retries.

    The back-off parameters are constructor arguments rather than config: operators tune attempts and
    time budgets; the curve itself only needs changing in tests.
    """

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
        self._wait = wait_exponential_jitter(
            multiplier=backoff_initial_s, max=backoff_max_s, jitter=backoff_jitter_s
        )
        self._sleep = sleep

    def summarize(self, turns: Sequence[SummaryTurn], *, previous_handoff: str | None) -> str:
        """Return a summary of at most ``max_summary_chars``; raise SummaryProviderError on failure."""
        s = self.settings
        messages = [
            {"role": "system", "content": _SYSTEM_PROMPT.format(max_chars=s.max_summary_chars)},
            {"role": "user", "content": format_turns(turns, previous_handoff, s.max_input_chars)},
        ]
        started = time.monotonic()
        attempts = 0

        def attempt() -> str:
            nonlocal attempts
            attempts += 1
            # Never let one attempt outlive the total budget: shrink its timeout to what is left.
            remaining = s.total_timeout_s - (time.monotonic() - started)
            try:
                return self._complete(messages, timeout_s=max(0.05, min(s.timeout_s, remaining)))
            except SummaryProviderError as exc:
                exc.attempts = attempts  # lets the caller log "after N attempts"
                raise

        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, SummaryProviderError) and exc.transient),
            # Both stops apply: whichever comes first ends the retries. stop_before_delay also refuses
            # to start a back-off sleep that would end past the total budget.
            stop=stop_after_attempt(s.max_retries + 1) | stop_before_delay(s.total_timeout_s),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        return retrying(attempt)

    def _complete(self, messages: list[dict[str, str]], *, timeout_s: float) -> str:
        """One HTTP attempt: call litellm, translate its failures, validate and trim the answer."""
        s = self.settings
        try:
            litellm = load_litellm()
        except ImportError as exc:
            raise SummaryProviderError(LITELLM_UNAVAILABLE, transient=False) from exc
        api_key = (os.environ.get(s.api_key_env) if s.api_key_env else None) or _DUMMY_API_KEY
        try:
            response = litellm.completion(
                model=s.model,
                api_base=s.api_base,
                api_key=api_key,
                messages=messages,
                timeout=timeout_s,
                # ~3 chars per token plus slack; the hard cap is enforced by trimming below anyway.
                max_tokens=max(32, s.max_summary_chars // 2),
                num_retries=0,  # tenacity owns retries; litellm/openai must not multiply them
            )
        except provider_exception_types() as exc:
            # litellm re-wraps transport and parse failures (connection refused, bad JSON) as generic
            # 500s; classify_exception walks the cause chain to recover what really happened.
            raise classify_exception(exc, timeout_s=timeout_s) from exc
        return trim_to_chars(_extract_text(response), s.max_summary_chars)


def _extract_text(response: Any) -> str:
    """Pull the first choice's text out of a litellm ModelResponse; junk raises SummaryProviderError."""
    try:
        choices = response.choices
        content = choices[0].message.content if choices else None
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise SummaryProviderError(MALFORMED_RESPONSE, transient=False) from exc
    if not choices:
        raise SummaryProviderError(MALFORMED_RESPONSE, transient=False)
    if not isinstance(content, str) or not content.strip():
        raise SummaryProviderError(EMPTY_RESPONSE, transient=False)
    # Models like to wrap a one-liner in quotes; strip them so the cap is spent on content.
    text = normalize_space(content).strip("\"'“”")
    if not text:
        raise SummaryProviderError(EMPTY_RESPONSE, transient=False)
    return text


__all__ = [
    "LiteLLMSummaryProvider",
    "ModelProviderSettings",
    "SummaryProvider",
    "SummaryProviderError",
    "SummaryTurn",
    "format_turns",
    "load_litellm",
]
