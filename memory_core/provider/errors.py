"""Model-provider failures and the stable reason strings reported (as ``summary_error``, an entity
worker's log line, an embedding's EMBEDDING_UNAVAILABLE reason).

Reasons are part of the public contract (they surface in episodes and MCP results), so they are
short, lower-case, free of exception messages (which may echo URLs, prompts or keys) and drawn
from a fixed set: the constants below plus three templates with one parameter each.
"""

from __future__ import annotations

# --- Stable reason strings -------------------------------------------------------------------
PROVIDER_DISABLED = "provider disabled"  # [model_provider] enabled = false, or no provider wired
NO_TURNS = "no turns"  # nothing to summarize: the model is not asked
CONNECTION_REFUSED = "connection refused"  # nothing listening at api_base
CONNECTION_ERROR = "connection error"  # DNS, reset, TLS, ... any other transport failure
MALFORMED_RESPONSE = "malformed response"  # body not JSON, or no choices
EMPTY_RESPONSE = "empty response"  # choices present but the text is blank
LITELLM_UNAVAILABLE = "litellm unavailable"  # import failed
TIMEOUT_TEMPLATE = "timeout after {seconds:g}s"  # one attempt exceeded its timeout (last attempt's)
HTTP_STATUS_TEMPLATE = "http {status}"  # the server answered with a non-2xx status
PROVIDER_ERROR_TEMPLATE = "provider error ({name})"  # anything else; names the exception class

# 408/429 and 5xx are worth another try; every other status means "this request will not work".
_TRANSIENT_STATUSES = frozenset({408, 429})


def timeout_reason(seconds: float) -> str:
    """``timeout after 2s`` (``:g`` keeps ``0.5`` and ``10`` tidy)."""
    return TIMEOUT_TEMPLATE.format(seconds=round(seconds, 2))


def http_reason(status: int) -> str:
    """``http 503``."""
    return HTTP_STATUS_TEMPLATE.format(status=status)


def provider_error_reason(exc: BaseException) -> str:
    """``provider error (KeyError)``: the class name only, never the message."""
    return PROVIDER_ERROR_TEMPLATE.format(name=type(exc).__name__)


def is_transient_status(status: int) -> bool:
    """True for statuses a retry may cure: 408, 429 and any 5xx."""
    return status in _TRANSIENT_STATUSES or 500 <= status <= 599


class ProviderError(Exception):
    """The model provider did not give a usable answer. ``reason`` is one of the stable strings above.

    ``transient`` drives the retry policy; ``attempts`` is how many calls were made in total.
    """

    def __init__(self, reason: str, *, transient: bool, attempts: int = 1) -> None:
        super().__init__(reason)
        self.reason = reason
        self.transient = transient
        self.attempts = attempts


def provider_exception_types() -> tuple[type[BaseException], ...]:
    """The exception bases a litellm completion call can raise for provider trouble.

    Every litellm exception a plain completion raises derives from ``openai.OpenAIError``; httpx and
    OS errors are listed in case a transport failure slips through unwrapped. Imported lazily
    because these modules arrive with litellm.
    """
    import httpx
    import openai

    return (openai.OpenAIError, httpx.HTTPError, OSError)


def _cause_chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and everything it was raised from or while handling, outermost first, cycle-safe."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def classify_exception(exc: BaseException, *, timeout_s: float) -> ProviderError:
    """Map a litellm/openai/httpx failure to a reason and a transient flag.

    litellm's top-level class is not reliable on its own: a refused connection and an unparsable
    body both surface as ``InternalServerError(500)``, and a 504 as ``Timeout``. So the whole cause
    chain is inspected, most specific evidence first:

    1. a real HTTP status from the server (httpx ``HTTPStatusError`` or the openai SDK's own
       ``APIStatusError``; litellm's subclasses carry synthesized statuses and do not count);
    2. a timeout anywhere in the chain;
    3. a transport failure (refused, reset, DNS);
    4. a JSON/parse failure, or litellm's own synthesized 500 (e.g. "no choices") → malformed;
    5. anything else → ``provider error (<Class>)``, not retried.
    """
    import httpx
    import openai

    chain = _cause_chain(exc)
    for link in chain:
        if isinstance(link, httpx.HTTPStatusError):
            return _status_error(link.response.status_code)
        # litellm's own classes subclass openai's APIStatusError with *synthesized* statuses, so only
        # an error raised by the openai SDK itself counts as the server's word.
        if isinstance(link, openai.APIStatusError) and type(link).__module__.startswith("openai"):
            return _status_error(link.status_code)
    timeouts = (openai.APITimeoutError, httpx.TimeoutException, TimeoutError)
    transport = (openai.APIConnectionError, httpx.TransportError, ConnectionError)
    if any(isinstance(link, timeouts) for link in chain):
        return ProviderError(timeout_reason(timeout_s), transient=True)
    if any(isinstance(link, ConnectionRefusedError) for link in chain):
        return ProviderError(CONNECTION_REFUSED, transient=True)
    if any(isinstance(link, transport) for link in chain):
        return ProviderError(CONNECTION_ERROR, transient=True)
    if any(isinstance(link, ValueError | openai.APIResponseValidationError) for link in chain):
        return ProviderError(MALFORMED_RESPONSE, transient=False)
    # No real status and no transport failure: a 500 here was synthesized by litellm while parsing
    # a 200 answer it could not make sense of (empty body, a list, a response without choices).
    if getattr(exc, "status_code", None) == 500:
        return ProviderError(MALFORMED_RESPONSE, transient=False)
    return ProviderError(provider_error_reason(exc), transient=False)


def _status_error(status: int) -> ProviderError:
    return ProviderError(http_reason(status), transient=is_transient_status(status))
