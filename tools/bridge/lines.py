"""The bridge's reading of a stdio line: a JSON-RPC message to forward, or the error to answer.

The same replies as the in-process stdio server (:mod:`tools.mcp.stdio_replies`), in the standard
library only, so a bridge starts without importing the MCP SDK:

- a request holding a lone surrogate escape (``"\\ud800"``) -> forwarded as its stand-in
  (:mod:`tools.http.unencodable`): the server answers it under its own id
- not JSON, not UTF-8, or a notification holding a lone surrogate -> ``-32700``, ``id: null``
- JSON that is not a JSON-RPC 2.0 message -> ``-32600``, with its ``id`` when usable
"""

from __future__ import annotations

import json
from typing import Any

from tools.http.unencodable import marked_request

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def read_line(line: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(message, None)`` for a line to forward, ``(None, reply)`` for one to answer here."""
    try:
        message = json.loads(line)
    except (ValueError, UnicodeError) as exc:
        return None, _error(None, PARSE_ERROR, f"Parse error: the line is not valid JSON ({exc}).")
    try:
        json.dumps(message, ensure_ascii=False).encode("utf-8")
    except UnicodeError as exc:  # a lone surrogate cannot be encoded: a request is answered under its id
        marked = marked_request(message)
        if marked is not None:
            return marked, None
        return None, _error(None, PARSE_ERROR, f"Parse error: the line is not valid JSON ({exc}).")
    if _is_message(message):
        return message, None
    return None, _error(_request_id(message), INVALID_REQUEST,
                        "Invalid Request: the line is JSON but not a JSON-RPC message.")  # fmt: skip


def _is_message(message: object) -> bool:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return False
    if isinstance(message.get("method"), str):
        return True
    return "id" in message and ("result" in message or "error" in message)  # a reply to a server request


def _request_id(message: object) -> int | str | None:
    value = message.get("id") if isinstance(message, dict) else None
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    return None


def _error(request_id: int | str | None, code: int, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": text}}
