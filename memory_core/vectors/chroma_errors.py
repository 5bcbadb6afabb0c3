"""Chroma's failures as memory-core's coded errors, in one place: what is transient (retried
against a Chroma server with tenacity), a read-only or full store, and any other error of
Chroma's own (``STORE_ERROR``, never ``INTERNAL_ERROR``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import retry, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from memory_core.errors import StoreError, StoreReadOnlyError, StoreUnavailableError
from memory_core.store_errors import os_error

T = TypeVar("T")

BUSY_STATUSES = frozenset({429, 502, 503, 504})  # a remote Chroma (or a proxy before it) asking to retry


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what it was raised from or during (a few levels)."""
    out: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(out) < 5:
        out.append(seen)
        seen = seen.__cause__ or seen.__context__
    return out


def _http_status(exc: BaseException) -> int | None:
    """The status of the error response a remote Chroma answered, if that is what ``exc`` is.

    For an error type it does not know, chromadb's HttpClient raises a bare ``Exception`` with
    the response's text, raised while handling httpx's ``HTTPStatusError``: the chain tells."""
    import httpx

    for seen in _chain(exc):
        if isinstance(seen, httpx.HTTPStatusError):
            return seen.response.status_code
    return None


def _is_transient(exc: BaseException) -> bool:
    """Connection-level failures of a remote Chroma, or its "busy, retry" answers; never validation errors.

    chromadb sometimes re-raises them as another type (its HttpClient turns an
    ``httpx.ConnectError`` into a ``ValueError``), so the exception chain is searched too.
    """
    import httpx

    if any(isinstance(seen, httpx.TransportError | ConnectionError | TimeoutError) for seen in _chain(exc)):
        return True
    return _http_status(exc) in BUSY_STATUSES


def translate_errors(fn: Callable[[], T], *, remote: bool, retries: int) -> T:
    call = fn
    if remote and retries > 0:
        call = retry(
            retry=retry_if_exception(_is_transient),
            stop=stop_after_attempt(retries + 1),
            wait=wait_exponential_jitter(multiplier=0.1, max=2.0, jitter=0.1),
            reraise=True,
        )(fn)
    try:
        return call()
    except Exception as exc:  # the one translation point for Chroma's failures; unknown ones re-raise
        if _is_transient(exc):
            raise StoreUnavailableError("The Chroma server is unavailable; nothing was written.") from exc
        text = str(exc).lower()
        if "readonly" in text or "read-only" in text or "read only" in text:
            raise StoreReadOnlyError("The vector store is read-only; nothing was written.") from exc
        from chromadb.errors import ChromaError

        if isinstance(exc, OSError):  # by errno: a full disk is STORE_FULL
            raise os_error(exc, "writing the vector store") from exc
        if isinstance(exc, ChromaError):  # disk full, I/O errors, files it cannot open
            raise StoreError(f"The vector store failed ({type(exc).__name__}: {str(exc)[:200]}).") from exc
        if (status := _http_status(exc)) is not None:  # an error answer chromadb has no type for
            raise StoreError(f"The Chroma server answered HTTP {status} ({str(exc)[:200]}).") from exc
        raise
