"""The body budget at the ASGI level, with scripted ``receive`` sequences (no server, no timing).

A request whose *last* chunk did not fit the budget once hung for good: the guard had read
that chunk, then waited for more of a body that had already ended, and the client never got
its 503 (CI saw it as a 90 s ReadTimeout in the concurrent large-recall test).
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import anyio
import pytest

from tools.http.guard import HttpGuard

Message = MutableMapping[str, Any]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


class Script:
    """A client's body as ASGI messages; asking for more after the end is the bug under test."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.messages: list[Message] = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)
        ]
        self.read_past_end = False

    async def receive(self) -> Message:
        if self.messages:
            return self.messages.pop(0)
        self.read_past_end = True  # uvicorn would block here until the client disconnects
        raise AssertionError("receive() called after the body ended")


async def _run(guard: HttpGuard, chunks: list[bytes], declared: int | None = None) -> tuple[int, Message, Script]:
    script = Script(chunks)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    headers = [(b"host", b"127.0.0.1:9"), *([(b"content-length", str(declared).encode())] if declared else [])]
    scope = {"type": "http", "method": "POST", "path": "/mcp", "headers": headers}
    with anyio.fail_after(5):
        await guard(scope, script.receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body) if body else {}, script


async def _echo_app(scope: Any, receive: Any, send: Any) -> None:
    size = 0
    while True:
        message = await receive()
        size += len(message.get("body", b""))
        if not message.get("more_body", False):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": json.dumps({"size": size}).encode()})


def _guard(max_request: int, max_inflight: int) -> HttpGuard:
    return HttpGuard(_echo_app, policy=None, max_request_bytes=max_request, max_inflight_bytes=max_inflight)


@pytest.mark.anyio
async def test_a_last_chunk_past_the_budget_gets_503_without_reading_past_the_body() -> None:
    guard = _guard(1_000, 1_000)
    guard.budget.held = 700  # other requests hold 700 of 1,000 bytes
    status, body, script = await _run(guard, [b"a" * 200, b"b" * 200])  # fits, then the last chunk does not
    assert status == 503 and body["error"]["data"]["code"] == "SERVER_BUSY"
    assert not script.read_past_end
    assert guard.budget.held == 700  # what this request took was given back


@pytest.mark.anyio
async def test_a_middle_chunk_past_the_budget_drains_the_rest_then_gets_503() -> None:
    guard = _guard(10_000, 1_000)
    guard.budget.held = 700
    status, _, script = await _run(guard, [b"a" * 200, b"b" * 200, b"c" * 200])
    assert status == 503 and not script.messages and not script.read_past_end
    assert guard.budget.held == 700


@pytest.mark.anyio
async def test_a_last_chunk_past_the_per_request_cap_gets_413_without_reading_past_the_body() -> None:
    guard = _guard(300, 10_000)
    status, body, script = await _run(guard, [b"a" * 200, b"b" * 200])
    assert status == 413 and body["error"]["data"]["code"] == "REQUEST_TOO_LARGE"
    assert not script.read_past_end and guard.budget.held == 0


@pytest.mark.anyio
async def test_a_body_that_fits_reaches_the_app_whole_and_is_given_back_after() -> None:
    guard = _guard(1_000, 1_000)
    status, body, script = await _run(guard, [b"a" * 300, b"b" * 300], declared=600)
    assert status == 200 and body == {"size": 600} and not script.read_past_end
    assert guard.budget.held == 0
