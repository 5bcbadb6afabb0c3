"""The HTTP front door: Host/Origin checks against DNS rebinding, and a budget of body bytes.

One ASGI middleware wraps the whole streamable-HTTP app, so both checks run before the MCP
SDK (and any tool) sees a request:

- **Host and Origin (loopback binds).** A web page can make a browser send requests to a
  loopback server through a DNS name it controls (``attacker.example`` → 127.0.0.1); the
  request then carries ``Host: attacker.example`` and ``Origin: http://attacker.example``.
  The SDK turns its own check on only when the bind address is spelled exactly
  ``127.0.0.1``, ``localhost`` or ``::1``, so ``--host LOCALHOST`` or ``127.0.0.2`` served
  every page. Here every loopback bind allows exactly the names that reach its socket (the
  bound address, and ``localhost`` where it resolves there) on the bound port, compared
  after normalising case and IPv6 brackets. A foreign Host gets 421, a foreign or ``null``
  Origin 403. A request without Origin (not a browser) is judged by its Host alone.
- **Request bodies.** One body may hold at most ``max_request_bytes``; all bodies being read
  or handled at once at most ``max_inflight_bytes``. The bytes are counted as they arrive,
  before the app sees any of them, and stay counted until the response ends. A body declared
  (Content-Length) or found too large gets 413 without reading the rest; one that would pass
  the shared budget gets 503 with ``Retry-After``. Every refusal carries a JSON-RPC error body
  whose ``data.code`` is stable: ``HOST_NOT_ALLOWED``, ``ORIGIN_NOT_ALLOWED``,
  ``REQUEST_TOO_LARGE``, ``SERVER_BUSY``, ``REQUEST_TIMEOUT``.
- **Slow bodies.** A body must keep arriving: when ``body_timeout_s`` pass without a byte of it,
  the request gets 408 ``REQUEST_TIMEOUT`` and its bytes are given back, so a client that
  declares a body and never sends it holds neither memory nor a request in flight for long.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memory_core import ConfigError
from tools.auth import is_loopback

INVALID_REQUEST = -32600
RETRY_AFTER_S = 1
BODY_TIMEOUT_S = 30.0  # server.body_timeout_s's default
FORM_MAX_BYTES = 4096  # the inspector's bodies: its login form is the only one (tools/ui)


def check_body_budget(max_request_bytes: int, max_inflight_bytes: int) -> None:
    """Fail at start when one allowed body could never fit the shared budget."""
    if max_inflight_bytes < max_request_bytes:
        raise ConfigError(
            f"server.max_inflight_bytes ({max_inflight_bytes}) is smaller than server.max_request_bytes "
            f"({max_request_bytes}): a request of the allowed size could never be read.",
            key="server.max_inflight_bytes",
        )


def normalize_host(name: str) -> str:
    """Lowercase; IP addresses in canonical form, IPv6 in brackets (as a Host header has it)."""
    bare = name.strip().lower()
    if bare.startswith("[") and bare.endswith("]"):
        bare = bare[1:-1]
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return bare
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def loopback_names(bound_host: str) -> frozenset[str]:
    """The host names a client on this machine may use to reach a server bound to ``bound_host``.

    The bound address itself, ``localhost`` when the server sits on what it resolves to (127.0.0.1
    or ::1), and the addresses ``localhost`` resolves to when the server was bound by that name.
    Any other loopback address (127.0.0.2, …) allows only itself.
    """
    bound = normalize_host(bound_host)
    names = {bound}
    localhost = _resolve("localhost")
    if bound == "localhost":
        names |= localhost
    elif bound in localhost or bound in {"127.0.0.1", "[::1]"}:
        names.add("localhost")
    return frozenset(names)


def _resolve(name: str) -> set[str]:
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return set()
    return {normalize_host(str(info[4][0])) for info in infos}


@dataclass(frozen=True)
class HostPolicy:
    """Which Host and Origin headers a loopback server answers."""

    names: frozenset[str]
    port: int

    @classmethod
    def for_bind(cls, host: str, port: int) -> HostPolicy | None:
        """The policy of a loopback bind; None beyond loopback (bearer tokens guard those)."""
        return cls(loopback_names(host), port) if is_loopback(host) else None

    def allows_host(self, header: str | None) -> bool:
        if not header:
            return False
        name, port = _split_host_port(header)
        return port is not None and name in self.names and port == self.port

    def allows_origin(self, header: str | None) -> bool:
        if header is None:
            return True  # not sent by a browser; the Host check still applies
        try:
            parts = urlsplit(header.strip())
            port = parts.port
        except ValueError:
            return False
        if parts.scheme.lower() != "http" or not parts.hostname or parts.path or parts.query:
            return False  # "null", other schemes, anything that is not scheme://host[:port]
        return normalize_host(parts.hostname) in self.names and (port or 80) == self.port


def _split_host_port(header: str) -> tuple[str, int | None]:
    """``name[:port]`` or ``[v6][:port]`` → (normalised name, port; 80 when absent; None if bad)."""
    text = header.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return "", None
        name, rest = text[: end + 1], text[end + 1 :]
        if rest and not rest.startswith(":"):
            return "", None
        sep, port_text = rest[:1], rest[1:]
    else:
        name, sep, port_text = text.partition(":")
    if sep and not (port_text.isascii() and port_text.isdigit() and len(port_text) <= 5):
        return "", None  # "host:" or "host:80x"
    return normalize_host(name), int(port_text) if port_text else 80


class ByteBudget:
    """Bytes of request bodies held at once. The event loop is single-threaded: no lock needed."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0

    def take(self, n: int) -> bool:
        if self.held + n > self.capacity:
            return False
        self.held += n
        return True

    def give_back(self, n: int) -> None:
        self.held -= n


@dataclass(frozen=True)
class BodyCap:
    """The largest body a route takes, and the setting (or component) that says so."""

    max_bytes: int
    named_by: str


class HttpGuard:
    """ASGI middleware: Host/Origin policy (when given), then the body byte budget.

    ``path_caps`` lowers the per-request cap under a path prefix (the inspector's ``/ui`` takes
    nothing larger than a login form): such a body is refused before more of it is read.
    """

    def __init__(
        self, app: ASGIApp, *, policy: HostPolicy | None, max_request_bytes: int, max_inflight_bytes: int,
        body_timeout_s: float = BODY_TIMEOUT_S, path_caps: Mapping[str, BodyCap] | None = None,
    ) -> None:
        self.app = app
        self.policy = policy
        self.max_request_bytes = max_request_bytes
        self.budget = ByteBudget(max_inflight_bytes)
        self.body_timeout_s = body_timeout_s
        self._default_cap = BodyCap(max_request_bytes, "server.max_request_bytes")
        self._path_caps = dict(path_caps or {})

    def cap_for(self, path: str) -> BodyCap:
        """The body cap of a request path: the smallest among the prefixes it falls under."""
        caps = [cap for prefix, cap in self._path_caps.items() if path == prefix or path.startswith(f"{prefix}/")]
        return min([self._default_cap, *caps], key=lambda cap: cap.max_bytes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        cap = self.cap_for(scope.get("path", ""))
        refusal: Refusal | None = None
        declared = _content_length(headers)
        if self.policy is not None and not self.policy.allows_host(headers.get("host")):
            refusal = self._foreign_host
        elif self.policy is not None and not self.policy.allows_origin(headers.get("origin")):
            refusal = self._foreign_origin
        elif declared is not None and declared > cap.max_bytes:
            await self._too_large(cap, send)  # answered at once, unread (see _refuse)
            return
        elif declared is not None and declared > self.budget.capacity - self.budget.held:
            refusal = self._busy
        if refusal is not None:
            await self._refuse(refusal, receive, send, cap)
            return
        held = _Held()
        try:
            body, refusal, drain = await self._read_body(receive, held, cap)
            if refusal is not None:
                self.budget.give_back(held.n)
                held.n = 0
                if drain:
                    await self._discard_body(receive, cap)
                await refusal(send)
                return
            await self.app(scope, _replay(body, receive), send)
        finally:
            self.budget.give_back(held.n)

    async def _refuse(self, refusal: Refusal, receive: Receive, send: Send, cap: BodyCap) -> None:
        """Answer a request refused on its headers. A body within the cap is first read and dropped
        (one chunk in memory at a time): closing a connection with unread bytes makes the kernel
        reset it, and the client would see "connection reset" instead of the 503 or 403. A body
        over the cap is answered at once, unread; such a client may see the reset instead."""
        await self._discard_body(receive, cap)
        await refusal(send)

    async def _discard_body(self, receive: Receive, cap: BodyCap) -> None:
        """Read and drop a body, up to one request's worth."""
        dropped = 0
        while dropped <= cap.max_bytes:
            message = await self._next(receive)
            if message is None or message["type"] != "http.request" or not message.get("more_body", False):
                return
            dropped += len(message.get("body", b""))

    async def _read_body(
        self, receive: Receive, held: _Held, cap: BodyCap
    ) -> tuple[list[Message], Refusal | None, bool]:
        """Receive the body, counting each chunk against both limits before keeping it. Returns
        the messages, the refusal if a limit was passed (or the body stalled), and whether the rest
        is to be read and dropped before answering: only for a body within the cap refused for the
        shared budget (see _refuse); one over the cap, or stalled, is answered at once. A body
        already read to its end is not waited for again: that wait would last until the client
        gave up, and it never would, waiting for its answer."""
        messages: list[Message] = []
        while True:
            message = await self._next(receive)
            if message is None:
                return [], self._timed_out, False
            messages.append(message)
            if message["type"] != "http.request":
                return messages, None, False
            size = len(message.get("body", b""))
            body_left = bool(message.get("more_body", False))
            if held.n + size > cap.max_bytes:
                return [], partial(self._too_large, cap), False
            if not self.budget.take(size):
                return [], self._busy, body_left
            held.n += size
            if not body_left:
                return messages, None, False

    async def _next(self, receive: Receive) -> Message | None:
        """The next chunk of a body; None when none came within ``body_timeout_s``."""
        with anyio.move_on_after(self.body_timeout_s):
            return await receive()
        return None

    async def _foreign_host(self, send: Send) -> None:
        await _refuse(send, 421, "HOST_NOT_ALLOWED", "This server answers only its own loopback address and port "
                      "in the Host header.")

    async def _foreign_origin(self, send: Send) -> None:
        await _refuse(send, 403, "ORIGIN_NOT_ALLOWED", "Requests from web pages of other origins are refused.")

    async def _too_large(self, cap: BodyCap, send: Send) -> None:
        await _refuse(send, 413, "REQUEST_TOO_LARGE", f"A request body may hold at most {cap.max_bytes} "
                      f"bytes here ({cap.named_by}).")

    async def _timed_out(self, send: Send) -> None:
        await _refuse(send, 408, "REQUEST_TIMEOUT", f"The request body stopped arriving for {self.body_timeout_s:g} s "
                      "(server.body_timeout_s).")

    async def _busy(self, send: Send) -> None:
        await _refuse(send, 503, "SERVER_BUSY", "The server is reading too many large requests at once "
                      "(server.max_inflight_bytes); retry shortly.", retry_after=True)


Refusal = Callable[[Send], Awaitable[None]]


@dataclass
class _Held:
    """Bytes of one request counted against the budget (returned when its response ends)."""

    n: int = 0


def _content_length(headers: Headers) -> int | None:
    raw = headers.get("content-length")
    return int(raw) if raw is not None and raw.isascii() and raw.isdigit() else None


def _replay(messages: Iterable[Message], receive: Receive) -> Receive:
    pending = list(messages)

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return replay


async def _refuse(send: Send, status: int, code: str, message: str, *, retry_after: bool = False) -> None:
    """A JSON-RPC error body (id null: the request was never read) with a stable data.code."""
    body = json.dumps(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message, "data": {"code": code}}}
    ).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"connection", b"close")]
    if retry_after:
        headers.append((b"retry-after", str(RETRY_AFTER_S).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
