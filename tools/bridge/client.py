"""``memory-core serve`` over stdio as a thin bridge to the data directory's shared HTTP server.

Each JSON-RPC line read on stdin is POSTed to the server's streamable HTTP endpoint; every
message of the answer (JSON, or an SSE stream with progress notifications before the
response) is written to stdout, one line each. Requests run concurrently (one thread each),
so a slow recall does not hold up a ``tools/list``. After the handshake the bridge holds
the session's GET stream open: it carries server-initiated messages; and for as long as the
bridge runs it holds an attachment open, so the shared server counts this client as
connected (see :mod:`tools.serve.bridged`).

Every request gets exactly one answer. The answer is the server's, when its response carried
one; otherwise the bridge answers with a coded error of its own, saying whether the call may
have been applied (``may_have_been_applied``):

- refused before it was handled (the server's own code, e.g. ``REQUEST_TOO_LARGE`` or
  ``SERVER_BUSY``)                                   -> not applied
- the connection refused, the session unknown, the body not sent whole
                                                     -> not applied (the bridge recovers and resends once)
- the connection or the response stream cut before the answer (the server was killed)
                                                     -> ``SERVER_UNAVAILABLE``, may have been applied;
  a read-only call is resent instead, once
- still unanswered when the client closes stdin and the drain time is over
                                                     -> ``SERVER_UNAVAILABLE``, may have been applied

Every connection first has the server prove that it holds the secret of the data directory's
record (:func:`tools.bridge.locate.connect_verified`): no token and no content ever reach a
process that merely listens on the recorded port. When the server goes away (killed, stopped
after idling, restarted) the bridge says so in one line on stderr, and the next call starts or
finds the server again (:func:`tools.bridge.locate.ensure_shared_server`), replays the
client's ``initialize`` and sends the call again — a transparent restart. Every wait is bounded;
nothing hangs.

Stdlib only (plus the stdlib-only :mod:`tools.bridge.locate` and :mod:`tools.server_record`), and never
the MCP SDK: this process must start fast.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import IO, Any

from memory_core import MemoryCoreError
from tools.bridge.lines import read_line
from tools.bridge.locate import SharedServerError, UnprovenServer, connect_verified, say_on_stderr
from tools.registry import read_only_names
from tools.server_record import ATTACH_PATH, MCP_PATH, Announcement, BridgeBinding, bridge_token

# The 2026-07-28 wire: a request carries its protocol version in params._meta and repeats it,
# its method and (tools/call, prompts/get, resources/read) its name in routing headers.
VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
NAME_BEARING = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 300.0  # one call (a recall on a cold store) may take a while; never forever
DRAIN_TIMEOUT_S = 30.0  # after stdin closes, how long answers still in flight are awaited (all of them)
MAX_CONCURRENT = 16
MAX_REFUSAL_BYTES = 64 * 1024  # an error response is read this far, no further
# The HTTP guard's refusals (tools/http/guard.py), for one whose body a connection reset cut off
GUARD_REFUSALS = {
    408: ("REQUEST_TIMEOUT", "The request body stopped arriving at the server (server.body_timeout_s)"),
    413: ("REQUEST_TOO_LARGE", "The request is larger than the server takes (server.max_request_bytes)"),
    503: ("SERVER_BUSY", "The server is reading too many large requests at once (server.max_inflight_bytes); "
          "retry shortly"),
}
# Calls that can be sent twice without harm when the connection broke mid-call.
SAFE_METHODS = frozenset({"initialize", "ping", "tools/list", "resources/list", "prompts/list",
                          "resources/templates/list", "completion/complete", "logging/setLevel"})
# Tools that only read (their registry spec says so): a call of one is resent too.
READ_ONLY_TOOLS = read_only_names()
Message = dict[str, Any]
Locate = Callable[[], Announcement]
Say = Callable[[str], None]


class RequestRefused(MemoryCoreError):
    """The server refused a request before handling it; ``code`` is the server's own (e.g. REQUEST_TOO_LARGE)."""

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.code = code


class _NotDelivered(Exception):
    """The server did not take the message (refused, restarted, session unknown): safe to resend."""


class _MaybeDelivered(Exception):
    """The connection broke after the message was sent, before its answer: it may have been applied."""


class _Refused(Exception):
    """The server answered the request with a refusal of its own (an HTTP error status): not applied."""

    def __init__(self, answer: Message | None, error: MemoryCoreError | None) -> None:
        super().__init__()
        self.answer = answer  # a JSON-RPC error without a code of ours: passed on, with the request's id
        self.error = error


class _Call:
    """One message from the client; a request among them is answered exactly once."""

    __slots__ = ("answered", "body", "message")

    def __init__(self, message: Message) -> None:
        self.message = message
        self.answered = False
        self.body = _encode(message)

    @property
    def method(self) -> str | None:
        method = self.message.get("method")
        return method if isinstance(method, str) else None

    @property
    def is_request(self) -> bool:
        return self.method is not None and "id" in self.message

    def is_answered_by(self, answer: Message) -> bool:
        return self.is_request and answer.get("id") == self.message["id"] and ("result" in answer or "error" in answer)


class Bridge:
    """One stdio client's connection to the shared server (``locate`` finds or starts it)."""

    def __init__(self, locate: Locate, binding: BridgeBinding, stdin: IO[bytes], stdout: IO[bytes],
                 say: Say | None = None) -> None:
        self._locate = locate
        self._binding = binding
        self._stdin, self._stdout = stdin, stdout
        self._say = say or say_on_stderr
        self._write_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self._workers: list[threading.Thread] = []
        self._pending: set[_Call] = set()  # requests read and not yet answered (guarded by _write_lock)
        self._server: Announcement | None = None
        self._generation = 0  # bumped by each recovery: a call recovers only the server it saw fail
        self._session: str | None = None
        self._protocol: str | None = None
        self._init: Message | None = None  # the client's initialize, replayed after a restart
        self._closing = threading.Event()
        self._attached: tuple[Announcement, threading.Thread] | None = None
        self._reported: set[tuple[int, str]] = set()  # servers whose loss was already said
        self._report_lock = threading.Lock()
        self._located = threading.Event()
        self._start_error: MemoryCoreError | None = None

    # ---- the loop --------------------------------------------------------------------------
    def run(self) -> None:
        """Forward stdin until it closes, then answer what is left and end the session.

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
            call = _Call(message)
            if call.is_request:
                with self._write_lock:
                    self._pending.add(call)
            if call.method in ("initialize", "notifications/initialized"):
                self._forward(call)  # in order: the session exists before anything else is sent
                if call.method == "notifications/initialized":
                    self._open_stream()
                continue
            self._slots.acquire()
            worker = threading.Thread(target=self._forward_released, args=(call,), daemon=True)
            self._workers = [w for w in self._workers if w.is_alive()] + [worker]
            worker.start()
        self._closing.set()
        deadline = time.monotonic() + DRAIN_TIMEOUT_S
        for worker in self._workers:
            worker.join(max(0.0, deadline - time.monotonic()))
        with self._write_lock:
            left = list(self._pending)
        for call in left:
            self._fail(call, _unavailable(call, "The client closed its input before the shared memory-core server "
                                                "answered this call"))
        self._end_session()

    def _first_locate(self) -> None:
        with self._state_lock:
            try:
                self._server = self._locate()
            except MemoryCoreError as exc:
                self._start_error = exc
            finally:
                self._located.set()
            if self._server is not None:
                self._attach(self._server)

    def _forward_released(self, call: _Call) -> None:
        try:
            self._forward(call)
        finally:
            self._slots.release()

    # ---- one message -----------------------------------------------------------------------
    def _forward(self, call: _Call) -> None:
        """Deliver one message and see its request answered, by the server or by the bridge."""
        try:
            self._deliver(call)
        except MemoryCoreError as exc:
            exc.fields.setdefault("may_have_been_applied", False)  # a failure to reach or start the server
            self._fail(call, exc)
        except _Refused as refused:
            if refused.error is not None:
                self._fail(call, refused.error)
            elif refused.answer is not None and call.is_request:
                self._finish(call, {**refused.answer, "id": call.message["id"]})
        except Exception as exc:  # top of a worker thread: a bug in the bridge still answers, in one line
            self._say(f"the bridge failed forwarding a {call.method or 'message'} ({type(exc).__name__}: {exc}).")
            self._fail(call, _unavailable(call, "The bridge failed while forwarding this call"))

    def _deliver(self, call: _Call) -> None:
        self._located.wait()
        if self._server is None:
            failed, self._start_error = self._start_error, None
            if failed is not None:
                raise failed  # the launch's own failure, once; later calls try again
            self._recover(self._generation, replay=False)
        self._check_size(call)
        for attempt in (1, 2):
            generation, session = self._generation, self._session
            try:
                self._post(call, session)
                if call.method == "initialize":
                    self._init = call.message
                return
            except _NotDelivered:
                if attempt == 2:
                    raise SharedServerError(
                        "The shared memory-core server could not take this call, even after it was found or started "
                        "again; the call was not applied (retry it shortly).", may_have_been_applied=False,
                    ) from None
            except _MaybeDelivered:
                if attempt == 2 or not _safe_to_resend(call.message):
                    raise _unavailable(call, "The shared memory-core server stopped while handling this call") from None
            self._recover(generation, replay=call.method != "initialize")

    def _check_size(self, call: _Call) -> None:
        """Refuse here, unsent, a request the server would refuse for its size (it says its limit in its record)."""
        limit = self._server.max_request_bytes if self._server is not None else None
        if limit is not None and len(call.body) > limit:
            raise RequestRefused(
                "REQUEST_TOO_LARGE", f"A request may hold at most {limit} bytes (server.max_request_bytes) and this "
                f"one holds {len(call.body)}; it was not sent and nothing was applied (send less, e.g. split it).",
                may_have_been_applied=False, max_request_bytes=limit, request_bytes=len(call.body))

    def _fail(self, call: _Call, error: MemoryCoreError) -> None:
        """Answer a request the server could not: a tool error for tools/call, a JSON-RPC error otherwise."""
        if not call.is_request:
            return  # a notification or a response: nobody waits for an answer
        text = f"{error.code}: {error.message}"
        request_id = call.message["id"]
        if call.method == "tools/call":
            result = {"content": [{"type": "text", "text": text}], "isError": True,
                      "structuredContent": {"error": error.to_dict()}}
            self._finish(call, {"jsonrpc": "2.0", "id": request_id, "result": result})
        else:
            self._finish(call, {"jsonrpc": "2.0", "id": request_id,
                                "error": {"code": -32603, "message": text, "data": error.to_dict()}})

    def _finish(self, call: _Call, answer: Message, *, quiet: bool = False) -> None:
        """Write the answer of ``call`` unless it was answered already (exactly once, whoever comes first)."""
        with self._write_lock:
            if call.answered:
                return
            call.answered = True
            self._pending.discard(call)
            if not quiet:
                self._write_locked(answer)

    def _headers(self, server: Announcement, session: str | None, message: Any = None) -> dict[str, str]:
        """The headers of a request to ``server`` (the one its connection was verified with)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {bridge_token(server.secret, self._binding)}"}
        modern = _modern_headers(message)
        if modern is not None:
            return {**headers, **modern}  # self-contained: no session
        if session is not None:
            headers["Mcp-Session-Id"] = session
        if self._protocol is not None:
            headers["Mcp-Protocol-Version"] = self._protocol
        return headers

    def _connect(self, server: Announcement) -> http.client.HTTPConnection:
        """A connection on which the server proved it holds the record's secret (nothing else was sent yet)."""
        try:
            conn = connect_verified(server, CONNECT_TIMEOUT_S)
        except UnprovenServer as exc:  # gone, or another process on its port: the next locate decides
            raise _NotDelivered from exc
        assert conn.sock is not None
        conn.sock.settimeout(READ_TIMEOUT_S)
        return conn

    def _post(self, call: _Call, session: str | None, *, quiet: bool = False) -> None:
        """Send one message and pass its response on; raises when its request was left unanswered."""
        server = self._server
        assert server is not None
        conn = self._connect(server)
        try:
            headers = self._headers(server, session, call.message)
            try:
                conn.request("POST", MCP_PATH, call.body, headers)
            except OSError as exc:  # the body did not all leave: the server cannot have handled it
                response = _early_response(conn)  # though it may have answered already (413: too large)
                if response is None:
                    raise _NotDelivered from exc
            else:
                try:
                    response = conn.getresponse()
                except (OSError, http.client.HTTPException) as exc:  # reset, closed, timed out after sending
                    raise _MaybeDelivered from exc
            self._read_response(call, response, headers, quiet=quiet)
        finally:
            conn.close()

    def _read_response(self, call: _Call, response: http.client.HTTPResponse, headers: dict[str, str], *,
                       quiet: bool) -> None:
        status = response.status
        restarted = status == 401  # a new server, with a new secret, on the old port
        if restarted or (status == 404 and "Mcp-Session-Id" in headers):  # or the session expired
            _drain(response)
            raise _NotDelivered
        if status >= 400:
            raise _refusal(response) if status < 500 or status == 503 else _MaybeDelivered
        if call.method == "initialize" and status == 200:
            self._session = response.getheader("mcp-session-id")
        try:
            for answer in _messages(response):
                self._note_protocol(call, answer)
                if call.is_answered_by(answer):
                    self._finish(call, answer, quiet=quiet)
                elif not quiet:
                    self._write(answer)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if not call.answered:
                raise _MaybeDelivered from exc
            return  # the answer is out; what broke after it does not matter
        if call.is_request and not call.answered:
            raise _MaybeDelivered  # a stream cut between chunks reads like a clean end: no answer, no end

    def _note_protocol(self, call: _Call, answer: Message) -> None:
        if call.method == "initialize" and call.is_answered_by(answer):
            version = (answer.get("result") or {}).get("protocolVersion")
            self._protocol = str(version) if version else None

    # ---- restart ---------------------------------------------------------------------------
    def _recover(self, seen: int, *, replay: bool) -> None:
        """Find or start the server again and open a new session (once, for all waiting calls)."""
        with self._state_lock:
            if self._generation != seen:
                return  # another call already recovered
            server = self._locate()
            self._server, self._session = server, None
            self._attach(server)
            if replay and self._init is not None:
                for step in (self._init, {"jsonrpc": "2.0", "method": "notifications/initialized"}):
                    try:  # a replayed handshake: its answers are not the client's to see
                        self._post(_Call(step), self._session, quiet=True)
                    except (_NotDelivered, _MaybeDelivered, _Refused) as exc:
                        raise SharedServerError("The shared memory-core server restarted but refused the session; "
                                                "the call was not applied.", may_have_been_applied=False) from exc
            self._generation += 1
        self._open_stream()

    # ---- attached to the server, the GET stream and the end --------------------------------
    def _attach(self, server: Announcement) -> None:
        """Hold a request open on ``server`` for as long as it lives (it counts this client)."""
        if self._attached is not None and self._attached[0] == server and self._attached[1].is_alive():
            return
        thread = threading.Thread(target=self._hold, args=(server,), daemon=True)
        self._attached = (server, thread)
        thread.start()

    def _hold(self, server: Announcement) -> None:
        try:
            conn = self._connect(server)
        except _NotDelivered:
            return  # gone already: the next call finds out and recovers
        try:
            assert conn.sock is not None
            conn.sock.settimeout(None)
            token = bridge_token(server.secret, self._binding)
            conn.request("GET", ATTACH_PATH, headers={"Authorization": f"Bearer {token}"})
            conn.getresponse().read()  # returns (or breaks) when the server stops
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()
        self._lost(server)

    def _lost(self, server: Announcement) -> None:
        """Say once, in one line, that ``server`` went away (unless this client is leaving)."""
        if self._closing.is_set():
            return
        with self._report_lock:  # not the state lock: a recovery holds that while a server starts
            key = (server.pid, server.secret)
            if key in self._reported:
                return
            self._reported.add(key)
        self._say(f"the shared server (pid {server.pid}, {server.url}) stopped; the next call starts or finds it "
                  "again.")

    def _open_stream(self) -> None:
        session = self._session
        if session is None or self._closing.is_set():
            return
        threading.Thread(target=self._listen, args=(session,), daemon=True).start()

    def _listen(self, session: str) -> None:
        server = self._server
        if server is None:
            return
        try:
            conn = self._connect(server)
        except _NotDelivered:
            return
        try:
            assert conn.sock is not None
            conn.sock.settimeout(None)  # a quiet stream is normal; it ends when either side closes
            headers = {**self._headers(server, session), "Accept": "text/event-stream"}
            conn.request("GET", MCP_PATH, headers=headers)
            response = conn.getresponse()
            if response.status != 200:
                return
            for answer in _messages(response):
                self._write(answer)
        except (OSError, http.client.HTTPException, ValueError):
            return  # the server went away: the attachment says so, the next call recovers
        finally:
            conn.close()

    def _end_session(self) -> None:
        server, session = self._server, self._session
        if session is None or server is None:
            return
        try:
            conn = self._connect(server)
        except _NotDelivered:
            return
        try:
            conn.request("DELETE", MCP_PATH, headers=self._headers(server, session))
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            pass
        finally:
            conn.close()

    def _write(self, message: Message) -> None:
        with self._write_lock:
            self._write_locked(message)

    def _write_locked(self, message: Message) -> None:
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        with contextlib.suppress(OSError):  # the client is gone (a closed pipe): nobody is left to answer
            self._stdout.write(data)
            self._stdout.flush()


def _unavailable(call: _Call, what: str) -> SharedServerError:
    """SERVER_UNAVAILABLE for a call left without its answer: a write may have been applied, a read was not."""
    if _safe_to_resend(call.message):
        return SharedServerError(f"{what}; it changes nothing, retry it.", may_have_been_applied=False)
    return SharedServerError(f"{what}; it may have been applied (retry it: add_memory with an idempotency_key is "
                             "safe to repeat).", may_have_been_applied=True)


def _encode(message: Message) -> bytes:
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    except UnicodeEncodeError:  # a lone surrogate: escaped, the JSON stays valid
        return json.dumps(message, separators=(",", ":")).encode()


def _early_response(conn: http.client.HTTPConnection) -> http.client.HTTPResponse | None:
    """The response a server sent before it read the whole body (and closed), if it can still be read."""
    try:
        response = conn.getresponse()
    except (OSError, http.client.HTTPException):
        return None
    return response if response.status >= 400 else None


def _drain(response: http.client.HTTPResponse) -> None:
    with contextlib.suppress(OSError, http.client.HTTPException):
        response.read(MAX_REFUSAL_BYTES)


def _refusal(response: http.client.HTTPResponse) -> _Refused:
    """The server's refusal of a request it did not handle: its JSON-RPC error, coded where it has a code."""
    try:
        body = response.read(MAX_REFUSAL_BYTES)
    except (OSError, http.client.HTTPException):
        body = b""
    error: Any = None
    try:
        parsed = json.loads(body)
        error = parsed.get("error") if isinstance(parsed, dict) else None
    except ValueError:
        pass
    if not isinstance(error, dict) or not isinstance(error.get("message"), str):  # no body (a reset cut it)
        text = body[:200].decode("utf-8", "replace").strip() or response.reason
        code, what = GUARD_REFUSALS.get(response.status, ("SERVER_REFUSED", f"The shared memory-core server "
                                                          f"refused the call (HTTP {response.status}: {text})"))
        return _Refused(None, RequestRefused(code, f"{what}; nothing was applied.", may_have_been_applied=False,
                                             http_status=response.status))
    data = error.get("data")
    coded = data.get("code") if isinstance(data, dict) else None
    if isinstance(coded, str):
        message = error["message"].rstrip()
        message = message if message.endswith(".") else f"{message}."
        return _Refused(None, RequestRefused(coded, f"{message} Nothing was applied.", may_have_been_applied=False,
                                             http_status=response.status))
    return _Refused({"jsonrpc": "2.0", "error": error}, None)


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
