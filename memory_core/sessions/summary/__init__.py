"""miniSummary: short session summaries from a model provider, with a deterministic fallback.

Importing this package is cheap: litellm is loaded only when a model summary is first requested.
"""

from memory_core.sessions.summary.extractive import extractive_summary
from memory_core.sessions.summary.provider import (
    LiteLLMSummaryProvider,
    SummaryProvider,
    SummaryTurn,
)
from memory_core.sessions.summary.service import SummaryOutcome, SummarySource, summarize_with_fallback

__all__ = ["LiteLLMSummaryProvider", "SummaryOutcome", "SummaryProvider", "SummarySource", "SummaryTurn",
           "extractive_summary", "summarize_with_fallback"]
