"""A Chroma server answering an HTTP error whose type chromadb does not know: chromadb's client
raises a bare ``Exception(resp.text)``; the vector store must still answer with a store error
(recall then falls back to the lexical side) instead of letting it surface as INTERNAL_ERROR."""

from __future__ import annotations

import httpx
import pytest
from chromadb.api.base_http_client import BaseHTTPClient

from memory_core.errors import StoreError, StoreUnavailableError
from memory_core.vectors.chroma_errors import translate_errors


def _server_answers(status: int, body: str) -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/api/v2/query")
    BaseHTTPClient._raise_chroma_error(httpx.Response(status, text=body, request=request))


def test_an_unknown_server_error_is_a_store_error_not_a_crash() -> None:
    with pytest.raises(StoreError) as caught:
        translate_errors(lambda: _server_answers(500, '{"error":"Mystery","message":"compaction failed"}'),
                          remote=True, retries=0)
    assert "compaction failed" in caught.value.message


def test_a_busy_server_is_retried_and_then_unavailable() -> None:
    calls: list[int] = []

    def busy() -> None:
        calls.append(1)
        _server_answers(503, "service unavailable")

    with pytest.raises(StoreUnavailableError):
        translate_errors(busy, remote=True, retries=2)
    assert len(calls) == 3


def test_a_server_error_that_clears_is_retried_to_success() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) == 1:
            _server_answers(503, "busy")
        return "ok"

    assert translate_errors(flaky, remote=True, retries=2) == "ok"


def test_a_client_error_is_not_retried() -> None:
    calls: list[int] = []

    def bad() -> None:
        calls.append(1)
        _server_answers(400, '{"error":"Unheard","message":"bad where"}')

    with pytest.raises(StoreError):
        translate_errors(bad, remote=True, retries=3)
    assert len(calls) == 1
