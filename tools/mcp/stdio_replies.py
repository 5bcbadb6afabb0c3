"""stdio: a line that is not a JSON-RPC message gets a JSON-RPC error reply, never silence.

The SDK's stdio transport hands an unparseable line to the session as an exception, and the
session drops it, so a client that sent a bad line (not JSON, or JSON holding a lone
surrogate escape such as ``"\\ud800"``) waited for its own timeout. ``ParseErrorReplies``
sits on the read side: it answers such a line on the write side and reads on.

- a request holding a lone surrogate   -> passed on as its stand-in (:mod:`tools.http.unencodable`),
  which the server answers under the request's own id (INVALID_INPUT for a tools/call)
- not JSON (or a notification holding a lone surrogate) -> ``-32700`` Parse error, ``id: null``
- JSON, but not a JSON-RPC message      -> ``-32600`` Invalid Request, with the line's ``id``
  when it had a usable one
- a blank line                          -> nothing (it carries no message)
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import anyio
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from mcp_types import PARSE_ERROR, ErrorData, JSONRPCError, jsonrpc_message_adapter
from pydantic import ValidationError

from tools.http.unencodable import marked_line

INVALID_REQUEST = -32600


def error_reply(exc: Exception) -> JSONRPCError | None:
    """The reply to a line the transport could not parse; None for a blank line."""
    problems = exc.errors() if isinstance(exc, ValidationError) else []
    line = problems[0].get("input") if problems else None
    if isinstance(line, str) and not line.strip():
        return None
    invalid_json = [p for p in problems if p["type"] == "json_invalid"]
    if invalid_json or not problems:
        where = str(invalid_json[0].get("ctx", {}).get("error", "")) if invalid_json else ""
        detail = f" ({where})" if where else ""
        return JSONRPCError(
            jsonrpc="2.0", id=None,
            error=ErrorData(code=PARSE_ERROR, message=f"Parse error: the line is not valid JSON{detail}."),
        )  # fmt: skip
    return JSONRPCError(
        jsonrpc="2.0", id=_request_id(line),
        error=ErrorData(code=INVALID_REQUEST, message="Invalid Request: the line is JSON but not a JSON-RPC message."),
    )  # fmt: skip


def stand_in(exc: Exception) -> SessionMessage | None:
    """The stand-in of a line that failed to parse only because it holds a lone surrogate."""
    problems = exc.errors() if isinstance(exc, ValidationError) else []
    line = problems[0].get("input") if problems and problems[0]["type"] == "json_invalid" else None
    marked = marked_line(line) if isinstance(line, str) else None
    return None if marked is None else SessionMessage(jsonrpc_message_adapter.validate_python(marked))


def _request_id(message: object) -> int | str | None:
    if isinstance(message, dict):
        value = message.get("id")
        if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
            return value
    return None


class ParseErrorReplies:
    """The stdio read stream, answering unparseable lines on ``write`` instead of passing them on."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], write: WriteStream[SessionMessage]) -> None:
        self._inner = inner
        self._write = write

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK reads it when present)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            marked = stand_in(item)
            if marked is not None:
                return marked
            reply = error_reply(item)
            if reply is not None:
                await self._write.send(SessionMessage(reply))

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> ParseErrorReplies:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> ParseErrorReplies:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc_val: BaseException | None, exc_tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None
