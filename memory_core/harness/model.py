"""The model a hook may ask to write its handoff: the configured provider's client, held to the hook's time."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.provider.client import ModelClient
    from memory_core.settings.schema import ModelProviderSettings


def hook_model_client(settings: ModelProviderSettings, left_s: float) -> ModelClient | None:
    """The provider's client with its timeouts cut to ``left_s`` seconds (None: the settings say no provider)."""
    if not settings.enabled:
        return None
    from memory_core.provider.client import ModelClient, endpoint  # litellm loads only when a model writes

    point = endpoint(settings)
    return ModelClient(replace(point, timeout_s=min(point.timeout_s, left_s),
                               total_timeout_s=min(point.total_timeout_s, left_s)))
