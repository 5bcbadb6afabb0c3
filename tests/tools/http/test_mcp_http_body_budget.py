"""Request bodies are bounded: one by server.max_request_bytes, all in flight by max_inflight_bytes.

40 concurrent 3.8 MB recalls once took the server to 1.28 GB. The server here runs with a
200 kB per-request cap and a 500 kB budget; raw sockets hold partly sent bodies open so the
budget is provably in use, and every refusal is checked to come with a JSON-RPC error body.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from testbed.mcp_harness import ROOT, SERVER_COMMAND, server_env
from tests.support.http_raw import RawSession, serving

MAX_REQUEST = 200_000
MAX_INFLIGHT = 500_000
HELD_SETTLE_S = 2.0
LIMITS = {"MEMORY_CORE_SERVER_MAX_REQUEST_BYTES": str(MAX_REQUEST),
          "MEMORY_CORE_SERVER_MAX_INFLIGHT_BYTES": str(MAX_INFLIGHT)}  # fmt: skip


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with serving("127.0.0.1", tmp_path_factory.mktemp("budget") / "data", **LIMITS) as address:
        yield address


def _open(url: str, head: dict[str, str]) -> socket.socket:
    """A raw connection that has sent a POST's headers and nothing of its body yet."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
    lines = [f"POST {parts.path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json",
             "Accept: application/json, text/event-stream", *(f"{k}: {v}" for k, v in head.items())]  # fmt: skip
    sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
    return sock


def _response(sock: socket.socket) -> tuple[int, dict[str, str], dict[str, Any]]:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, json.loads(body)


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return int(line.split(b":", 1)[1])
    return 1 << 30


def _no_answer_yet(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        sock.recv(1)  # a byte of a response, or b"" for a closed connection: either is an answer
        return False
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)


def _assert_refusal(status: int, body: dict[str, Any], expected_status: int, code: str) -> None:
    assert status == expected_status
    assert body["jsonrpc"] == "2.0" and body["id"] is None and body["error"]["code"] == -32600
    assert body["error"]["data"]["code"] == code


@pytest.mark.slow
def test_a_declared_body_over_the_cap_gets_413_before_a_byte_of_it_is_sent(url: str) -> None:
    sock = _open(url, {"Content-Length": str(50 * 1024 * 1024)})
    try:
        status, _, body = _response(sock)
    finally:
        sock.close()
    _assert_refusal(status, body, 413, "REQUEST_TOO_LARGE")
    assert "server.max_request_bytes" in body["error"]["message"]


def test_a_chunked_body_that_grows_past_the_cap_gets_413(url: str) -> None:
    sock = _open(url, {"Transfer-Encoding": "chunked"})
    try:
        chunk = b"x" * 50_000
        for _ in range(MAX_REQUEST // len(chunk) + 1):
            sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        status, _, body = _response(sock)
    finally:
        sock.close()
    _assert_refusal(status, body, 413, "REQUEST_TOO_LARGE")


@pytest.mark.slow
def test_bodies_past_the_shared_budget_get_503_until_the_held_ones_finish(url: str) -> None:
    raw = RawSession(url)
    held = []
    try:
        for _ in range(3):  # 3 x 150 kB held of the 500 kB budget; each declares 190 kB
            sock = _open(url, {"Content-Length": "190000", **raw.session_headers()})
            sock.sendall(b"x" * 150_000)
            held.append(sock)
        time.sleep(HELD_SETTLE_S)  # the server reads the held bytes (a request sent sooner would race them)
        for sock in held:
            assert _no_answer_yet(sock)  # still waiting for the rest of their bodies, holding the budget
        big_recall = {"tenant": "acme", "query": "budget", "exclude_contents": ["y" * 100_000]}
        busy = raw.call("recall", big_recall)
        _assert_refusal(busy.status_code, busy.json(), 503, "SERVER_BUSY")
        assert busy.headers["retry-after"] == "1"
        small = raw.call("recall", {"tenant": "acme", "query": "budget"})
        assert small.status_code == 200, small.text  # a small body still fits what is left
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 10
    after = raw.call("recall", big_recall)
    while after.status_code == 503 and time.monotonic() < deadline:
        time.sleep(0.1)
        after = raw.call("recall", big_recall)
    assert after.status_code == 200, after.text  # the held bytes were given back


def test_concurrent_large_recalls_are_answered_or_told_to_retry_never_dropped(url: str) -> None:
    raw = RawSession(url)
    body = {"tenant": "acme", "query": "concurrent", "exclude_contents": ["z" * 190_000]}  # near the cap
    with httpx.Client(timeout=60) as http:  # a refusal whose body was read to its end once never came

        def one(i: int) -> int:  # ids differ: responses are matched to requests by id in a session
            payload = {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                       "params": {"name": "recall", "arguments": body}}  # fmt: skip
            headers = {"Accept": "application/json, text/event-stream", **raw.session_headers()}
            status: int = http.post(url, json=payload, headers=headers).status_code
            return status

        with ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(one, range(16)))
    # a refused client reads its 503 (a reset connection would raise here), the rest their answer
    assert set(statuses) <= {200, 503} and 200 in statuses and 503 in statuses


@pytest.mark.slow
def test_an_inflight_budget_smaller_than_one_request_refuses_to_start(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--http", "--port", "0", "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
        env=server_env(MEMORY_CORE_SERVER_MAX_REQUEST_BYTES="100000", MEMORY_CORE_SERVER_MAX_INFLIGHT_BYTES="50000"),
    )  # fmt: skip
    assert run.returncode == 5  # CONFIG_INVALID's exit code
    assert "server.max_inflight_bytes" in run.stderr and "Traceback" not in run.stderr
