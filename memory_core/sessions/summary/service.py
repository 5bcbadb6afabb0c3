"""The one fail-soft point: ask the model provider, fall back to the extractive summary.

A summary is a convenience; a write or a ``recover_context`` call must never fail or hang because a
model is down. So :func:`summarize_with_fallback` never raises for provider trouble: it returns the
model's text, or a deterministic extractive summary together with a stable reason
(see :mod:`memory_core.provider.errors`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from memory_core.provider.errors import (
    EMPTY_RESPONSE,
    NO_TURNS,
    PROVIDER_DISABLED,
    ProviderError,
    provider_error_reason,
)
from memory_core.sessions.summary.extractive import extractive_summary
from memory_core.sessions.summary.provider import SummaryProvider, SummaryTurn
from memory_core.sessions.summary.text import trim_to_chars
from memory_core.settings.schema import ModelProviderSettings

log = logging.getLogger(__name__)

SummarySource = Literal["model", "fallback"]


@dataclass(frozen=True)
class SummaryOutcome:
    """What a summary request produced.

    ``error`` is None for a model summary and the stable reason for a fallback.
    """

    text: str
    source: SummarySource
    error: str | None = None

    def to_dict(self) -> dict[str, str | None]:
        """The wire shape used by episodes and MCP results."""
        return {"summary": self.text, "summary_source": self.source, "summary_error": self.error}


def summarize_with_fallback(
    provider: SummaryProvider | None,
    settings: ModelProviderSettings,
    turns: Sequence[SummaryTurn],
    previous_handoff: str | None = None,
) -> SummaryOutcome:
    """Summarize ``turns`` (oldest first) with the provider when enabled, else extractively.

    Never raises for provider failures; a programming error in the extractive path would still
    surface, since that path has no external dependency to excuse it.
    """
    max_chars = settings.max_summary_chars

    def fallback(reason: str) -> SummaryOutcome:
        text = extractive_summary(turns, previous_handoff, max_chars=max_chars)
        return SummaryOutcome(text=text, source="fallback", error=reason)

    if not turns:
        # Nothing new to say; paying for a model call to rephrase the handoff is not worth it.
        return fallback(NO_TURNS)
    if provider is None or not settings.enabled:
        return fallback(PROVIDER_DISABLED)

    try:
        text = provider.summarize(turns, previous_handoff=previous_handoff)
    except ProviderError as exc:
        log.info("miniSummary fell back: %s after %d attempt(s)", exc.reason, exc.attempts)
        return fallback(exc.reason)
    except Exception as exc:
        # Deliberately broad, and the only such catch: SummaryProvider is a Protocol, so a plug-in
        # may raise anything, and a summary never fails the call (docs/how-it-works.md, "Sessions and
        # summaries"). The class name is kept as the reason; the traceback goes to the log, not to the caller.
        log.warning("miniSummary provider raised %s; using the extractive fallback", type(exc).__name__,
                    exc_info=True)
        return fallback(provider_error_reason(exc))

    # Providers other than ours may ignore the cap or return junk; enforce the contract here too.
    text = trim_to_chars(text if isinstance(text, str) else "", max_chars)
    if not text:
        return fallback(EMPTY_RESPONSE)
    return SummaryOutcome(text=text, source="model", error=None)
