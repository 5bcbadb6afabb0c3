"""``memory-core serve`` over stdio as a thin bridge to the data directory's shared HTTP server.

Each JSON-RPC line read on stdin is POSTed to the server's streamable HTTP endpoint; every
message of the answer (JSON, or an SSE stream with progress notifications before the
response) is written to stdout, one line each. Requests run concurrently (one thread each),
so a slow recall does not hold up a ``tools/list``. After the handshake the bridge holds
the session's GET stream open: it carries server-initiated messages, and while it is open
the shared server counts this client as connected (see :mod:`tools.bridge.auth`).

When the server goes away (killed, stopped after idling, restarted) the next call finds the
connection refused or the session unknown: the bridge starts or finds the server again
(:func:`tools.bridge.shared_server.ensure_shared_server`), replays the client's ``initialize`` and
sends the call again — a transparent restart. A call that may already have reached the
server when the connection broke is not repeated (it could write twice): it is answered
with ``SERVER_UNAVAILABLE``. Every wait is bounded; nothing hangs.

Stdlib only (plus the stdlib-only :mod:`tools.bridge.shared_server`): this process must start fast.
"""

from __future__ import annotations

import base64
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from typing import IO, Any

from memory_core.errors import MemoryCoreError
from tools.bridge.lines import read_line
from tools.bridge.shared_server import Announcement, SharedServerError, bridge_token

MCP_PATH = "/mcp"
ATTACH_PATH = "/mcp-bridge/attach"  # held open while the client is connected: the shared server is not idle
# The 2026-07-28 wire: a request carries its protocol version in params._meta and repeats it,
# its method and (tools/call, prompts/get, resources/read) its name in routing headers.
VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 300.0  # one call (a recall on a cold store) may take a while; never forever
DRAIN_TIMEOUT_S = 30.0  # after stdin closes, how long answers still in flight are awaited
MAX_CONCURRENT = 16
# Calls that can be sent twice without harm when the connection broke mid-call.
SAFE_METHODS = frozenset({"initialize", "ping", "tools/list", "resources/list", "prompts/list",
                          "resources/templates/list", "completion/complete", "logging/setLevel"})
# Tools that only read: a call of one is resent too.
READ_ONLY_TOOLS = frozenset({"recall", "recall_with_context", "get_contents", "query_recent_turns", "check_memory",
                             "related"})
Message = dict[str, Any]
Locate = Callable[[], Announcement]


class _NotDelivered(Exception):
    """The server did not take the message (refused, restarted, session unknown): safe to resend."""


class _MaybeDelivered(Exception):
    """The connection broke after the message was sent: it may have been applied."""


class Bridge:
    """One stdio client's connection to the shared server (``locate`` finds or starts it)."""

    def __init__(self, locate: Locate, tenant: str | None, agent: str | None,
                 stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._locate = locate
        self._tenant, self._agent = tenant, agent
        self._stdin, self._stdout = stdin, stdout
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._workers: list[threading.Thread] = []
        self._server: Announcement | None = None
        self._session: str | None = None
        self._protocol: str | None = None
        self._init: Message | None = None  # the client's initialize, replayed after a restart
        self._stream: threading.Thread | None = None
        self._closing = threading.Event()
        self._attached: threading.Thread | None = None
        self._located = threading.Event()
        self._start_error: MemoryCoreError | None = None

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Forward stdin until it closes, then end the session.

        The server is found (or started) at once, while the client is still starting; if that
        fails, every request is answered with the coded reason (e.g. STORE_LOCKED) instead of a
        dropped connection.
        """
        first = threading.Thread(target=self._first_locate, daemon=True)
        first.start()
        for line in iter(self._stdin.readline, b""):
            if not line.strip():
                continue
            message, refusal = read_line(line)
            if refusal is not None or message is None:
                self._write(refusal or {})
                continue
            if isinstance(message, dict) and message.get("method") in ("initialize", "notifications/initialized"):
                self._forward(message)  # in order: the session exists before anything else is sent
                if message["method"] == "notifications/initialized":
                    self._open_stream()
                continue
            self._slots.acquire()
            worker = threading.Thread(target=self._forward_released, args=(message,), daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
            worker.start()
        self._closing.set()
        for worker in self._workers:
            worker.join(DRAIN_TIMEOUT_S)
        self._end_session()

    def _first_locate(self) -> None:
        with self._state_lock:
            try:
                self._server = self._locate()
            except MemoryCoreError as exc:
                self._start_error = exc
            finally:
                self._located.set()
        self._attach()

    def _forward_released(self, message: Any) -> None:
        try:
            self._forward(message)
        finally:
            self._slots.release()

    # ---- one message -----------------------------------------------------------------------
    def _forward(self, message: Any) -> None:
        method = message.get("method") if isinstance(message, dict) else None
        self._located.wait()
        if self._server is None:
            failed, self._start_error = self._start_error, None
            try:
                if failed is not None:
                    raise failed  # the launch's own failure, once; later calls try again
                self._recover(None, replay=False)
            except MemoryCoreError as exc:
                self._fail(message, exc)
                return
        for attempt in (1, 2):
            session = self._session
            try:
                self._post(message, session)
                if method == "initialize":
                    self._init = message
                return
            except _NotDelivered:
                if attempt == 2:
                    break
                try:
                    self._recover(session, replay=method != "initialize")
                except MemoryCoreError as exc:
                    self._fail(message, exc)
                    return
            except _MaybeDelivered:
                if _safe_to_resend(message) and attempt == 1:
                    try:
                        self._recover(session, replay=method != "initialize")
                        continue
                    except MemoryCoreError as exc:
                        self._fail(message, exc)
                        return
                self._fail(message, SharedServerError(
                    "The shared memory-core server stopped while handling this call; it may or may not have "
                    "been applied (retry it: add_memory with an idempotency_key is safe to repeat)."))
                return
        self._fail(message, SharedServerError("The shared memory-core server is not reachable; it was restarted "
                                              "but still refused the call."))

    def _fail(self, message: Any, error: MemoryCoreError) -> None:
        """Answer a request the server could not: a tool error for tools/call, a JSON-RPC error otherwise."""
        if not isinstance(message, dict) or "id" not in message or "method" not in message:
            return  # a notification or a response: nobody waits for an answer
        text = f"{error.code}: {error.message}"
        if message["method"] == "tools/call":
            result = {"content": [{"type": "text", "text": text}], "isError": True,
                      "structuredContent": {"error": error.to_dict()}}
            self._write({"jsonrpc": "2.0", "id": message["id"], "result": result})
        else:
            self._write({"jsonrpc": "2.0", "id": message["id"],
                         "error": {"code": -32603, "message": text, "data": error.to_dict()}})

    def _headers(self, session: str | None, message: Any = None) -> dict[str, str]:
        assert self._server is not None
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {bridge_token(self._server.secret, self._tenant, self._agent)}"}
        modern = _modern_headers(message)
        if modern is not None:
            return {**headers, **modern}  # self-contained: no session
        if session is not None:
            headers["Mcp-Session-Id"] = session
        if self._protocol is not None:
            headers["Mcp-Protocol-Version"] = self._protocol
        return headers

    def _connect(self) -> http.client.HTTPConnection:
        assert self._server is not None
        host, port = self._server.address
        conn = http.client.HTTPConnection(host, port, timeout=CONNECT_TIMEOUT_S)
        try:
            conn.connect()
        except OSError as exc:
            conn.close()
            raise _NotDelivered from exc
        assert conn.sock is not None
        conn.sock.settimeout(READ_TIMEOUT_S)
        return conn

    def _post(self, message: Any, session: str | None, write: Callable[[Message], None] | None = None) -> None:
        conn = self._connect()
        try:
            try:
                headers = self._headers(session, message)
                conn.request("POST", MCP_PATH, json.dumps(message).encode(), headers)
                response = conn.getresponse()
            except OSError as exc:  # reset, closed, timed out after sending
                raise _MaybeDelivered from exc
            restarted = response.status == 401  # a new server, with a new secret, on the old port
            if restarted or (response.status == 404 and "Mcp-Session-Id" in headers):  # or the session expired
                response.read()
                raise _NotDelivered
            if isinstance(message, dict) and message.get("method") == "initialize" and response.status == 200:
                self._session = response.getheader("mcp-session-id")
            try:
                for answer in _messages(response):
                    self._note_protocol(message, answer)
                    (write or self._write)(answer)
            except OSError as exc:
                raise _MaybeDelivered from exc
        finally:
            conn.close()

    def _note_protocol(self, message: Any, answer: Message) -> None:
        is_init = isinstance(message, dict) and message.get("method") == "initialize"
        if is_init and answer.get("id") == message.get("id"):
            version = (answer.get("result") or {}).get("protocolVersion")
            self._protocol = str(version) if version else None

    # ---- restart ---------------------------------------------------------------------------
    def _recover(self, failed_session: str | None, *, replay: bool) -> None:
        """Find or start the server again and open a new session (once, for all waiting calls)."""
        with self._state_lock:
            if self._session != failed_session:
                return  # another call already recovered
            self._server = self._locate()
            self._session = None
            self._attach()
            if not (replay and self._init is not None):
                return
            for step in (self._init, {"jsonrpc": "2.0", "method": "notifications/initialized"}):
                try:  # a replayed handshake: its answers are not the client's to see
                    self._post(step, self._session, write=_discard)
                except (_NotDelivered, _MaybeDelivered) as exc:
                    raise SharedServerError("The shared memory-core server restarted but refused the session.") from exc
        self._open_stream()

    # ---- attached to the server, the GET stream and the end --------------------------------
    def _attach(self) -> None:
        """Hold a request open on the server for as long as it lives (it counts this client)."""
        if self._server is None or (self._attached is not None and self._attached.is_alive()):
            return
        self._attached = threading.Thread(target=self._hold, args=(self._server,), daemon=True)
        self._attached.start()

    def _hold(self, server: Announcement) -> None:
        conn = http.client.HTTPConnection(*server.address, timeout=CONNECT_TIMEOUT_S)
        try:
            conn.connect()
            assert conn.sock is not None
            conn.sock.settimeout(None)
            token = bridge_token(server.secret, self._tenant, self._agent)
            conn.request("GET", ATTACH_PATH, headers={"Authorization": f"Bearer {token}"})
            conn.getresponse().read()  # returns when the server stops
        except OSError:
            return
        finally:
            conn.close()

    def _open_stream(self) -> None:
        session = self._session
        if session is None or self._closing.is_set():
            return
        stream = threading.Thread(target=self._listen, args=(session,), daemon=True)
        self._stream = stream
        stream.start()

    def _listen(self, session: str) -> None:
        try:
            conn = self._connect()
        except _NotDelivered:
            return
        try:
            assert conn.sock is not None
            conn.sock.settimeout(None)  # a quiet stream is normal; it ends when either side closes
            headers = {**self._headers(session), "Accept": "text/event-stream"}
            conn.request("GET", MCP_PATH, headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                return
            for answer in _messages(response):
                self._write(answer)
        except OSError:
            return  # the server went away: the next call recovers
        finally:
            conn.close()

    def _end_session(self) -> None:
        if self._session is None:
            return
        try:
            conn = self._connect()
        except _NotDelivered:
            return
        try:
            conn.request("DELETE", MCP_PATH, headers=self._headers(self._session))
            conn.getresponse().read()
        except OSError:
            pass
        finally:
            conn.close()

    def _write(self, message: Message) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with self._write_lock:
            self._stdout.write(data)
            self._stdout.flush()


def _modern_headers(message: Any) -> dict[str, str] | None:
    """The routing headers of a 2026-07-28 request (None: a handshake-era message)."""
    if not isinstance(message, dict) or not isinstance(message.get("params"), dict):
        return None
    meta = message["params"].get("_meta")
    version = meta.get(VERSION_META_KEY) if isinstance(meta, dict) else None
    if not isinstance(version, str):
        return None
    headers = {"Mcp-Protocol-Version": version, "Mcp-Method": _header_value(str(message.get("method", "")))}
    name = message["params"].get(NAME_BEARING.get(str(message.get("method")), ""))
    if isinstance(name, str):
        headers["Mcp-Name"] = _header_value(name)
    return headers


def _header_value(value: str) -> str:
    """Printable ASCII as is; anything else in the SDK's ``=?base64?…?=`` form."""
    if value.isascii() and value.isprintable() and value == value.strip() and not value.startswith("=?base64?"):
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode()}?="


def _safe_to_resend(message: Any) -> bool:
    if not isinstance(message, dict):
        return False
    if message.get("method") == "tools/call":
        return (message.get("params") or {}).get("name") in READ_ONLY_TOOLS
    return message.get("method") in SAFE_METHODS


def _discard(message: Message) -> None:
    return None


def _messages(response: http.client.HTTPResponse) -> Iterator[Message]:
    """The JSON-RPC messages of a response: a JSON body, or the ``data`` of each SSE event."""
    kind = (response.getheader("content-type") or "").split(";")[0].strip().lower()
    if kind == "text/event-stream":
        data: list[str] = []
        for raw in iter(response.readline, b""):
            line = raw.decode("utf-8").rstrip("\r\n")
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                yield from _parsed("\n".join(data))
                data = []
        if data:
            yield from _parsed("\n".join(data))
        return
    body = response.read()
    if body.strip():
        yield from _parsed(body.decode("utf-8"))


def _parsed(text: str) -> Iterator[Message]:
    if not text.strip():
        return
    try:
        value = json.loads(text)
    except ValueError:
        return  # not JSON-RPC (an HTML error page, a priming event): nothing to forward
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, dict) and item.get("jsonrpc") == "2.0":
            yield item
