"""The serving process's side of bridged stdio clients: bridge tokens, the hello proof, and knowing when it is idle.

- :class:`BridgeTokenVerifier` accepts the bridge tokens of :mod:`tools.server_record` (the
  binding of one stdio client — tenant, agent, scope — signed with this start's secret). The
  claims carry that binding, unbound included (``BRIDGE_CLAIM``): :class:`tools.auth.TenantScope` then ignores
  the server's own ``server.tenant`` / ``server.agent`` for the connection.
- :class:`ChainedTokenVerifier` puts it in front of the configured ``[server.tokens]``.
- :class:`BridgeAuth` is the ASGI guard for servers without configured tokens (the SDK's
  bearer middleware is off there): a valid bridge token binds the request, an invalid one is
  401, and no token is anonymous — unless ``require`` (the shared background server, which
  serves bridged clients only).
- :class:`ServerProof` answers a bridge's hello with the proof that this server holds the
  secret of its data directory's record (:func:`tools.server_record.server_proof`), before the
  bridge sends anything else.
- :class:`ActivityTracker` counts authenticated requests in flight (a bridge holds an
  attachment open for as long as its client is connected); the shared server stops after
  ``server.shared_idle_s`` with none. Requests without a valid bridge token never count, so
  no other local user can keep the server (and its lock on the data directory) alive.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken, TokenVerifier
from starlette.types import ASGIApp, Receive, Scope, Send

from tools.auth import AGENT_CLAIM, BRIDGE_CLAIM, SCOPE_CLAIM, TENANT_CLAIM
from tools.server_record import ATTACH_PATH, HELLO_PATH, MCP_PATH, NONCE, TOKEN_PREFIX, read_bridge_token, server_proof


class BridgeTokenVerifier:
    """The SDK's ``TokenVerifier`` for bridge tokens signed with ``secret``."""

    def __init__(self, secret: str) -> None:
        self._secret = secret

    def verify(self, token: str) -> AccessToken | None:
        binding = read_bridge_token(self._secret, token)
        if binding is None:
            return None
        claims: dict[str, Any] = {BRIDGE_CLAIM: True, TENANT_CLAIM: binding.tenant, AGENT_CLAIM: binding.agent,
                                  SCOPE_CLAIM: binding.scope.value}
        client_id = f"bridge:{binding.tenant or '-'}/{binding.agent or '-'}"
        return AccessToken(token=token, client_id=client_id, scopes=[binding.scope.value], subject=binding.tenant,
                           claims=claims)

    async def verify_token(self, token: str) -> AccessToken | None:
        return self.verify(token)


class ChainedTokenVerifier:
    """The first verifier that accepts a token decides it."""

    def __init__(self, verifiers: Sequence[TokenVerifier]) -> None:
        self._verifiers = list(verifiers)

    async def verify_token(self, token: str) -> AccessToken | None:
        for verifier in self._verifiers:
            found = await verifier.verify_token(token)
            if found is not None:
                return found
        return None


def bearer(scope: Scope) -> str | None:
    """The request's bearer token, if it sent one."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            return token.strip() if kind.lower() == "bearer" else None
    return None


async def _unauthorized(send: Send, message: str) -> None:
    body = json.dumps({"error": "invalid_token", "error_description": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"www-authenticate", b'Bearer error="invalid_token"')]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class BridgeAuth:
    """ASGI guard binding requests that carry a bridge token (servers without ``[server.tokens]``)."""

    def __init__(self, app: ASGIApp, verifier: BridgeTokenVerifier, *, require: bool) -> None:
        self.app = app
        self.verifier = verifier
        self.require = require

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope.get("path", "").startswith(MCP_PATH):
            await self.app(scope, receive, send)
            return
        token = bearer(scope)
        if token is None or not token.startswith(TOKEN_PREFIX):
            if self.require:
                await _unauthorized(send, "This server serves bridged memory-core clients only.")
                return
            await self.app(scope, receive, send)  # anonymous, as on any loopback server without tokens
            return
        access = self.verifier.verify(token)
        if access is None:
            await _unauthorized(send, "The bridge token is not valid for this server (restarted?).")
            return
        bound = auth_context_var.set(AuthenticatedUser(access))
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(bound)


class ServerProof:
    """ASGI middleware answering ``HELLO_PATH?nonce=<hex>`` with ``{"proof": server_proof(secret, port, nonce)}``.

    The port is the one the request arrived on. The proof reveals nothing of the secret, so
    the hello needs no token; it counts as no activity.
    """

    def __init__(self, app: ASGIApp, secret: str) -> None:
        self.app = app
        self._secret = secret

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != HELLO_PATH:
            await self.app(scope, receive, send)
            return
        nonce = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("nonce", [""])[0]
        server = scope.get("server")
        if not NONCE.fullmatch(nonce) or not server:
            await _json(send, 400, {"error": "invalid_request", "error_description": "A hex nonce is required."})
            return
        await _json(send, 200, {"proof": server_proof(self._secret, nonce, int(server[1]))})


async def _json(send: Send, status: int, value: dict[str, str]) -> None:
    body = json.dumps(value).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class ActivityTracker:
    """ASGI middleware counting authenticated HTTP requests in flight; ``idle_for()`` is 0 while any is.

    Only a request with a valid bridge token counts (a connection without one, finished or not,
    never keeps the shared server running). The tracker also answers ``ATTACH_PATH``: a bridge
    holds that request open for as long as its client is connected (whatever protocol revision
    the client speaks), so a connected but quiet client keeps the shared server running; the
    request ends when the bridge exits.
    """

    def __init__(self, app: ASGIApp, verifier: BridgeTokenVerifier) -> None:
        self.app = app
        self.verifier = verifier
        self.in_flight = 0
        self.attached = 0  # bridges attached now: the stdio clients connected (the shared_clients metric)
        self._since = time.monotonic()

    def idle_for(self) -> float:
        return 0.0 if self.in_flight else time.monotonic() - self._since

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = bearer(scope)
        authenticated = token is not None and self.verifier.verify(token) is not None
        inner: ASGIApp = self.app
        if scope.get("path") == ATTACH_PATH:
            if not authenticated:
                await _unauthorized(send, "Only bridged memory-core clients attach.")
                return
            inner = self._attached
        if not authenticated:
            await inner(scope, receive, send)
            return
        self.in_flight += 1
        try:
            await inner(scope, receive, send)
        finally:
            self.in_flight -= 1
            self._since = time.monotonic()

    async def _attached(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.attached += 1
        try:
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
            while (await receive())["type"] != "http.disconnect":
                pass
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            self.attached -= 1
