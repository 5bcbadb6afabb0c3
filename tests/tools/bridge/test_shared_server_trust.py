"""Whom a stdio bridge trusts, and who keeps the shared server alive (real subprocesses, real sockets).

- A stale ``mcp-server.json`` whose pid is alive and whose port is held by a process that does not
  know the record's secret (another local user's, after pid reuse) is never sent a token or content:
  the client starts its own server and says so in one line.
- ``kill`` (SIGTERM) of the shared server removes its record.
- Connections without a token do not keep the shared server alive, and unfinished bodies time out.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from testbed.processes import shared_servers
from tests.support.raw_bridge import RawBridge, tool_error
from tests.tools.bridge.test_shared_server import stop_servers
from tools.bridge.locate import ensure_shared_server, is_alive, live_announcement
from tools.server_record import ANNOUNCEMENT, announce, read_announcement

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

SECRET_CONTENT = "the vault code is 4711"


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


class Impostor(ThreadingHTTPServer):
    """A listener on a recorded port that does not know the record's secret, and answers everything."""

    daemon_threads = True

    def __init__(self, port: int = 0) -> None:
        self.seen: list[dict[str, Any]] = []
        super().__init__(("127.0.0.1", port), _ImpostorHandler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def everything_seen(self) -> str:
        return json.dumps(self.seen)


class _ImpostorHandler(BaseHTTPRequestHandler):
    server: Impostor

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        self.server.seen.append({"method": self.command, "path": self.path, "headers": dict(self.headers),
                                 "body": body})  # fmt: skip
        request_id = json.loads(body).get("id") if body.startswith("{") else None
        forged = {"jsonrpc": "2.0", "id": request_id, "proof": "0" * 64,
                  "result": {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"ref": "mem:666"},
                             "protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "x", "version": "1"}}}  # noqa: E501
        data = json.dumps(forged).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("mcp-session-id", "forged-session")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        return None


def _assert_told_nothing(impostor: Impostor) -> None:
    for request in impostor.seen:
        assert request["method"] == "GET" and request["path"].startswith("/mcp-bridge/hello?nonce="), request
        assert "Authorization" not in request["headers"] and request["body"] == "", request
    assert "mcb1." not in impostor.everything_seen() and "vault" not in impostor.everything_seen()


def test_a_stale_record_naming_a_live_pid_and_a_foreign_listener_is_refused_and_a_new_server_started(
    data_dir: Path,
) -> None:
    impostor = Impostor()
    data_dir.mkdir(parents=True)
    announce(data_dir, f"http://127.0.0.1:{impostor.port}/mcp", "the-dead-servers-secret", shared=True)
    assert read_announcement(data_dir) is not None  # names this test's own pid: alive, like a reused pid
    bridge = RawBridge(data_dir, MEMORY_CORE_TENANT="acme")
    try:
        bridge.handshake()
        added = bridge.wait_for(bridge.call("add_memory", session="s", agent="a", content=SECRET_CONTENT))
        assert tool_error(added) is None
        assert added["result"]["structuredContent"]["ref"] == "mem:1"  # the real store's answer, not the forged one
        assert bridge.close() == 0
    finally:
        bridge.kill()
        impostor.shutdown()
    _assert_told_nothing(impostor)
    now = read_announcement(data_dir)
    assert now is not None and now.pid != os.getpid() and str(impostor.port) not in now.url
    said = [line for line in bridge.stderr.splitlines() if line.strip()]
    assert len(said) == 1 and said[0].startswith("memory-core: ") and "did not prove" in said[0], bridge.stderr


def test_a_listener_that_takes_the_port_of_a_killed_server_mid_session_gets_no_token_and_no_content(
    data_dir: Path,
) -> None:
    bridge = RawBridge(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_SERVER_SHARED_IDLE_S="30")
    impostor: Impostor | None = None
    try:
        bridge.handshake()
        assert tool_error(bridge.wait_for(bridge.call("add_memory", session="s", agent="a", content="hello"))) is None
        first = read_announcement(data_dir)
        assert first is not None
        os.kill(first.pid, signal.SIGKILL)
        while is_alive(first):
            time.sleep(0.05)
        impostor = Impostor(first.address[1])  # another user's process on the freed port ...
        raw = json.loads((data_dir / ANNOUNCEMENT).read_text())
        announce(data_dir, raw["url"], raw["secret"], shared=True)  # ... and the dead server's pid, reused
        answer = bridge.wait_for(bridge.call("add_memory", session="s", agent="a", content=SECRET_CONTENT))
        assert tool_error(answer) is None and answer["result"]["structuredContent"]["ref"] == "mem:2"
        assert bridge.close() == 0
    finally:
        bridge.kill()
        if impostor is not None:
            impostor.shutdown()
    assert impostor is not None
    _assert_told_nothing(impostor)
    assert "Traceback" not in bridge.stderr


def test_a_record_others_may_read_is_not_trusted(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    found = ensure_shared_server(data_dir, None)
    assert live_announcement(data_dir) == found
    (data_dir / ANNOUNCEMENT).chmod(0o644)  # its secret is readable by every local user now
    said: list[str] = []
    assert live_announcement(data_dir, said.append) is None
    assert len(said) == 1 and "open to other users (mode 644)" in said[0]


def test_sigterm_of_the_shared_server_removes_its_record(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    found = ensure_shared_server(data_dir, None)
    os.kill(found.pid, signal.SIGTERM)  # what the STORE_LOCKED message advises: `kill <pid>`
    deadline = time.monotonic() + 30
    while found.pid in shared_servers(data_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert found.pid not in shared_servers(data_dir)
    assert not (data_dir / ANNOUNCEMENT).exists()


# ---- who keeps the shared server alive ---------------------------------------------------------
def _unfinished_post(url: str, token: str | None = None) -> socket.socket:
    """A POST that declares a body of 10,000 bytes and sends 10 of them."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    sock.sendall((f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                  f"Accept: application/json, text/event-stream\r\n{auth}Content-Length: 10000\r\n\r\n"
                  '{"jsonrpc"').encode())  # fmt: skip
    return sock


def _status(sock: socket.socket) -> int | None:
    """The status of the answer on ``sock``; None when the server closed without one."""
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        data += chunk
    return int(data.split(b" ", 2)[1])


def test_three_unfinished_requests_without_a_token_neither_keep_the_shared_server_alive_nor_wait(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    monkeypatch.setenv("MEMORY_CORE_SERVER_SHARED_IDLE_S", "2")
    found = ensure_shared_server(data_dir, None)
    started = time.monotonic()
    held = [_unfinished_post(found.url) for _ in range(3)]
    try:
        assert [_status(sock) for sock in held] == [401, 401, 401]  # refused on its headers, body unread
        while found.pid in shared_servers(data_dir) and time.monotonic() - started < 30:
            time.sleep(0.2)
        assert found.pid not in shared_servers(data_dir), "unauthenticated connections kept the server alive"
    finally:
        for sock in held:
            sock.close()


def test_an_unfinished_body_times_out_with_408_on_a_server_that_takes_anonymous_requests(tmp_path: Path) -> None:
    from tests.support.http_raw import serving

    with serving("127.0.0.1", tmp_path / "data", MEMORY_CORE_SERVER_BODY_TIMEOUT_S="1") as url:
        sock = _unfinished_post(url)
        sock.settimeout(20)
        started = time.monotonic()
        try:
            assert _status(sock) == 408
        finally:
            sock.close()
        assert time.monotonic() - started < 10
