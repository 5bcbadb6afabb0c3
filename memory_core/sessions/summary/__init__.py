"""miniSummary: short session summaries from a model provider, with a deterministic fallback.

Importing this package is cheap: litellm is loaded only when a model summary is first requested.
"""

from memory_core.provider.errors import (
    CONNECTION_ERROR,
    CONNECTION_REFUSED,
    EMPTY_RESPONSE,
    LITELLM_UNAVAILABLE,
    MALFORMED_RESPONSE,
    NO_TURNS,
    PROVIDER_DISABLED,
    ProviderError,
    http_reason,
    provider_error_reason,
    timeout_reason,
)
from memory_core.sessions.summary.extractive import extractive_summary
from memory_core.sessions.summary.provider import (
    LiteLLMSummaryProvider,
    ModelProviderSettings,
    SummaryProvider,
    SummaryTurn,
)
from memory_core.sessions.summary.service import SummaryOutcome, SummarySource, summarize_with_fallback

__all__ = [
    "CONNECTION_ERROR",
    "CONNECTION_REFUSED",
    "EMPTY_RESPONSE",
    "LITELLM_UNAVAILABLE",
    "MALFORMED_RESPONSE",
    "NO_TURNS",
    "PROVIDER_DISABLED",
    "LiteLLMSummaryProvider",
    "ModelProviderSettings",
    "ProviderError",
    "SummaryOutcome",
    "SummaryProvider",
    "SummarySource",
    "SummaryTurn",
    "extractive_summary",
    "http_reason",
    "provider_error_reason",
    "summarize_with_fallback",
    "timeout_reason",
]
