"""Requests holding a lone surrogate: answered under their own id, never as a parse error.

JSON may escape a UTF-16 surrogate on its own (``"\\ud800"``): the line is valid JSON, but the
string is not Unicode text and cannot be encoded as UTF-8. The SDK's parsers refuse the whole
message (stdio: ``-32700`` with ``id: null``, so the client waited out its timeout; HTTP: a
400). Here such a request is rewritten, before the SDK reads it, into a well-formed request of
the same id and method that carries only a marker in ``params._meta``: the paths of the strings
that could not be encoded. The server then answers it like any other bad input
(:func:`tools.mcp.server.refuse_unencodable`): a ``tools/call`` gets the coded INVALID_INPUT tool
error naming the argument; any other request a JSON-RPC ``-32602`` error. Nothing of the
request's content reaches a tool, so nothing is written.

Every way in uses it: the in-process stdio server (:mod:`tools.mcp.stdio_replies`), the stdio bridge
(:mod:`tools.bridge.lines`) and HTTP (:class:`UnencodableRequests`, before the SDK's app).
A notification or a response holding one has no id to answer under: it stays a parse error.

Standard library only at import time: the bridge imports it and must start fast.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

MARK = "memory-core/unencodable"  # params._meta key: the paths of the strings that could not be encoded
# a \uD800-\uDFFF escape in the raw bytes: only then can a body hold a lone surrogate
SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
MAX_PATHS = 8


def encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(text: str) -> str:
    """``text`` with each lone surrogate written as its escape (``\\ud800``), so it can be quoted."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def unencodable_paths(value: Any, path: str = "") -> list[str]:
    """Where ``value`` holds a string (or an object key) that cannot be encoded, as
    ``content``, ``entities[0].name``; a bad key names the object that holds it."""
    found: list[str] = []
    if isinstance(value, str):
        if not encodable(value):
            found.append(path)
    elif isinstance(value, dict):
        for key, item in value.items():
            if not encodable(key) and path not in found:
                found.append(path)
            found += unencodable_paths(item, f"{path}.{printable(key)}" if path else printable(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found += unencodable_paths(item, f"{path}[{i}]")
    return found[:MAX_PATHS]


def marked_request(message: object) -> dict[str, Any] | None:
    """The stand-in for a JSON-RPC request that holds a lone surrogate; None when ``message``
    is not a request with a usable id, or holds none."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return None
    request_id, method = message.get("id"), message.get("method")
    usable_id = (isinstance(request_id, str) and encodable(request_id)) or (
        isinstance(request_id, int) and not isinstance(request_id, bool))
    if not usable_id or not isinstance(method, str) or not encodable(method):
        return None
    params = message.get("params")
    if method == "tools/call" and isinstance(params, dict):
        arguments = params.get("arguments")
        paths = unencodable_paths(arguments) if isinstance(arguments, dict) else []
        name = params.get("name")
        if isinstance(name, str) and not encodable(name):
            paths.insert(0, "name")
        paths = paths or unencodable_paths(params, "params")  # elsewhere in the call (its _meta)
        if not paths:
            return None
        stand_in = {"name": printable(name) if isinstance(name, str) else "", "arguments": {}, "_meta": {MARK: paths}}
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": stand_in}
    paths = unencodable_paths(params, "params")
    if not paths:
        return None
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"_meta": {MARK: paths}}}


def marked_line(line: str | bytes) -> dict[str, Any] | None:
    """:func:`marked_request` of a raw line or body (None: not JSON, or nothing to mark)."""
    try:
        return marked_request(json.loads(line))
    except (ValueError, UnicodeDecodeError):
        return None


def marked_paths(meta: object) -> list[str] | None:
    """The marker's paths in a request's ``_meta``; None when it carries none."""
    paths = meta.get(MARK) if isinstance(meta, dict) else None
    if isinstance(paths, list) and paths and all(isinstance(p, str) for p in paths):
        return paths
    return None


def sentence(paths: list[str]) -> str:
    """The one-line refusal: which argument (or request parameter) held the lone surrogate."""
    what = "Parameter" if paths[0] == "params" or paths[0].startswith(("params.", "params[")) else "Argument"
    more = f" (and {len(paths) - 1} more)" if len(paths) > 1 else ""
    return (f"{what} '{paths[0]}'{more} holds a lone surrogate (an unpaired \\ud800-\\udfff escape), which is "
            "not Unicode text; nothing was done.")


class UnencodableRequests:
    """ASGI middleware: a POSTed JSON-RPC request holding a lone surrogate is replaced by its
    stand-in (:func:`marked_request`) before the app parses it; every other body passes untouched.

    It sits behind the body budget (:class:`tools.http.guard.HttpGuard`), which has the body in
    memory already; the session, authentication and Accept checks all still run in the app.
    """

    def __init__(self, app: ASGIApp, path: str) -> None:
        self.app = app
        self.path = path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self.path:
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in messages if m["type"] == "http.request")
        stand_in = marked_line(body) if SURROGATE_ESCAPE.search(body) else None
        if stand_in is not None:
            body = json.dumps(stand_in).encode()
            headers = [(k, v) for k, v in scope["headers"] if k.lower() != b"content-length"]
            scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
            messages = [{"type": "http.request", "body": body, "more_body": False}]
        pending = list(messages)

        async def replay() -> Message:
            return pending.pop(0) if pending else await receive()

        await self.app(scope, replay, send)
