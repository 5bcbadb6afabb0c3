"""Request ids, and HTTP responses counted by route and status.

Every HTTP request gets an id: the ``X-Request-Id`` it sent when that is a plain token (1-64 of
letters, digits, ``._:-``), else a new random one. It is set for the tool call the request carries
(its log line and span: :mod:`memory_core.observe.calls`) and sent back in ``X-Request-Id``, so an
agent's harness, a proxy and the server's log name one request alike.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_core.observe import new_request_id, request_id_var
from tools.server_record import ATTACH_PATH, HELLO_PATH, MCP_PATH

if TYPE_CHECKING:
    from memory_core.observe import Metrics  # prometheus_client loads only when metrics are on

HEADER = b"x-request-id"
VALID_ID = re.compile(rb"[A-Za-z0-9._:-]{1,64}")
ROUTES = ((MCP_PATH, "mcp"), ("/ui", "ui"), ("/healthz", "probe"), ("/readyz", "probe"), ("/metrics", "metrics"),
          (HELLO_PATH, "bridge"), (ATTACH_PATH, "bridge"))


def route_of(path: str) -> str:
    """A bounded label for a path (the metric must not grow with what clients ask for)."""
    return next((name for prefix, name in ROUTES if path.startswith(prefix)), "other")


class RequestIds:
    """ASGI middleware: the request's id in and out; its response counted when ``metrics`` is on."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        sent = next((v for k, v in scope.get("headers", []) if k == HEADER), None)
        rid = sent.decode("ascii") if sent is not None and VALID_ID.fullmatch(sent) else new_request_id()
        status = 0

        async def answer(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {**message, "headers": [*message.get("headers", []), (HEADER, rid.encode("ascii"))]}
            await send(message)

        token = request_id_var.set(rid)
        try:
            await self.app(scope, receive, answer)
        finally:
            request_id_var.reset(token)
            if self.metrics is not None and status:
                self.metrics.record_http(route_of(scope.get("path", "")), status)
