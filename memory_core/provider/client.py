"""One client for the configured model provider, through litellm.

litellm is heavy (seconds to import) and, left to its defaults, reaches for the network on import
(remote model-cost map, beta-header catalogue). It is imported lazily, once, the first time a
model is actually asked, after its offline switches are set: ``import memory_core`` never imports it.

Every call is bounded twice: each attempt by ``timeout_s`` (shrunk to what is left of the budget),
all attempts and back-offs together by ``total_timeout_s``. Only transient failures (timeouts,
connection errors, 408/429/5xx) are retried, with tenacity; every failure is raised as a
:class:`~memory_core.provider.errors.ProviderError` with a stable reason and the attempts made.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_before_delay, wait_exponential_jitter

from memory_core.provider.errors import (
    LITELLM_UNAVAILABLE,
    MALFORMED_RESPONSE,
    ProviderError,
    classify_exception,
    provider_exception_types,
)
from memory_core.settings.schema import ModelProviderSettings

T = TypeVar("T")

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


def load_litellm() -> ModuleType:
    """Import litellm once, in offline mode, and quiet its stdout chatter; thread-safe."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _litellm_lock:
        if _litellm is None:
            # Forced rather than setdefault: litellm is imported "in offline mode" (docs/configuration.md,
            # "Session summaries"): nothing may reach the network on import.
            os.environ.update(_OFFLINE_ENV)
            import litellm

            # litellm prints "Give Feedback / Get Help" banners to stdout on every error; an MCP stdio
            # server must never write to stdout, and our reasons already say what went wrong.
            litellm.suppress_debug_info = True
            litellm.disable_hf_tokenizer_download = True
            _litellm = litellm
    return _litellm


@dataclass(frozen=True)
class Endpoint:
    """Which model to ask, where, and how long to wait for it."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None  # the environment variable holding the key (never the key itself)
    timeout_s: float = 30.0  # one attempt
    total_timeout_s: float = 90.0  # every attempt and back-off together
    max_retries: int = 2


def endpoint(settings: ModelProviderSettings) -> Endpoint:
    """The model provider's settings as the client's endpoint."""
    return Endpoint(settings.model, settings.api_base, settings.api_key_env, timeout_s=settings.timeout_s,
                    total_timeout_s=settings.total_timeout_s, max_retries=settings.max_retries)


class ModelClient:
    """Completions and embeddings from one :class:`Endpoint`, with bounded, transient-only retries.

    The back-off curve is a constructor argument rather than configuration: operators tune attempts
    and time budgets; the curve itself only needs changing in tests.
    """

    def __init__(self, endpoint: Endpoint, *, backoff_initial_s: float = 0.1, backoff_max_s: float = 1.0,
                 backoff_jitter_s: float = 0.1, sleep: Callable[[float], None] = time.sleep) -> None:
        self.endpoint = endpoint
        self._wait = wait_exponential_jitter(multiplier=backoff_initial_s, max=backoff_max_s, jitter=backoff_jitter_s)
        self._sleep = sleep

    def complete(self, messages: Sequence[dict[str, str]], *, max_tokens: int, parse: Callable[[Any], T]) -> T:
        """Ask for a chat completion and ``parse`` the first choice's message content (as the provider
        sent it: a string, or None, or junk); a ProviderError from ``parse`` is retried only when transient."""
        e = self.endpoint

        def attempt(timeout_s: float) -> T:
            litellm = _litellm_or_error()
            try:
                response = litellm.completion(model=e.model, api_base=e.api_base, api_key=self._key(),
                                              messages=list(messages), timeout=timeout_s, max_tokens=max_tokens,
                                              num_retries=0)  # tenacity owns retries: litellm must not add its own
            except provider_exception_types() as exc:
                # litellm re-wraps transport and parse failures (connection refused, bad JSON) as generic
                # 500s; classify_exception walks the cause chain to recover what really happened.
                raise classify_exception(exc, timeout_s=timeout_s) from exc
            return parse(first_choice_content(response))

        return self._retrying(attempt)

    def embed(self, texts: Sequence[str]) -> Any:
        """The provider's embedding response for ``texts`` (``data``: index and embedding per text)."""
        e = self.endpoint

        def attempt(timeout_s: float) -> Any:
            litellm = _litellm_or_error()
            try:
                return litellm.embedding(model=e.model, input=list(texts), api_base=e.api_base, api_key=self._key(),
                                         timeout=timeout_s, num_retries=0)
            except Exception as exc:  # every provider failure is classified; none escapes uncoded
                raise classify_exception(exc, timeout_s=timeout_s) from exc

        return self._retrying(attempt)

    def _key(self) -> str:
        e = self.endpoint
        return (os.environ.get(e.api_key_env) if e.api_key_env else None) or _DUMMY_API_KEY

    def _retrying(self, attempt: Callable[[float], T]) -> T:
        e = self.endpoint
        started = time.monotonic()
        attempts = 0

        def once() -> T:
            nonlocal attempts
            attempts += 1
            # never let one attempt outlive the total budget: shrink its timeout to what is left
            remaining = e.total_timeout_s - (time.monotonic() - started)
            try:
                return attempt(max(0.05, min(e.timeout_s, remaining)))
            except ProviderError as exc:
                exc.attempts = attempts  # lets the caller log "after N attempts"
                raise

        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, ProviderError) and exc.transient),
            # both stops apply: whichever comes first ends the retries; stop_before_delay also refuses
            # to start a back-off sleep that would end past the total budget
            stop=stop_after_attempt(e.max_retries + 1) | stop_before_delay(e.total_timeout_s),
            wait=self._wait, sleep=self._sleep, reraise=True,
        )
        return retrying(once)


def _litellm_or_error() -> ModuleType:
    try:
        return load_litellm()
    except ImportError as exc:
        raise ProviderError(LITELLM_UNAVAILABLE, transient=False) from exc


def first_choice_content(response: Any) -> Any:
    """The first choice's message content of a completion; a response without choices is MALFORMED."""
    try:
        choices = response.choices
        return choices[0].message.content if choices else _no_choices()
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise ProviderError(MALFORMED_RESPONSE, transient=False) from exc


def _no_choices() -> Any:
    raise ProviderError(MALFORMED_RESPONSE, transient=False)
