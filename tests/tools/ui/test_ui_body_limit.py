"""Bodies sent to the inspector are bounded before they are read, on both surfaces that serve it.

``memory-core ui`` once read a whole 256 MiB login body before answering 413 (+522 MB of peak
memory, no token needed), and ``serve --http`` read 4 MiB of one (its MCP cap) for a route that
takes a login form at most. Real subprocesses and raw sockets; the server's peak memory comes
from /proc (VmHWM, reset through clear_refs just before the body is sent).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from testbed.mcp_harness import ROOT, SERVER_COMMAND, _await_url, server_env
from testbed.processes import stop
from tests.support.ui_store import CLI, make_store

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

HUGE = 256 * 1024 * 1024
CHUNK = b"x" * (1024 * 1024)
PEAK_BOUND = 3 * 1024 * 1024  # a bounded read costs kilobytes; reading to serve --http's MCP cap, 4 MiB; all, 522 MB
SETTLE_S = 60.0


@contextmanager
def _ui(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """``memory-core ui`` on a free port: (its /ui/ URL, its pid)."""
    data, config, _refs = make_store(tmp_path)
    proc = subprocess.Popen([*CLI, "ui", "--data-dir", str(data), "--config", str(config), "--port", "0",
                             "--announce"], cwd=ROOT, env=server_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "inspector on " in line, line + (proc.stdout.read() if proc.poll() is not None else "")
        yield line.rsplit(" ", 1)[1].strip(), proc.pid
    finally:
        stop(proc)


@contextmanager
def _serve_http(tmp_path: Path, **env: str) -> Iterator[tuple[str, int]]:
    """``serve --http`` with the inspector mounted: (its /ui/ URL, its pid)."""
    data, config, _refs = make_store(tmp_path)
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(data), "--config", str(config)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)  # fmt: skip
    try:
        yield _await_url(proc).rsplit("/mcp", 1)[0] + "/ui/", proc.pid
    finally:
        stop(proc)


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for pid {pid}")


def _post_login(url: str, *, chunked: bool, total: int = HUGE) -> int | None:
    """POST ``total`` bytes to the login form as fast as the server takes them; its status, if it answered."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}"
    sock.sendall((f"POST /ui/login HTTP/1.1\r\nHost: {host}:{port}\r\n"
                  f"Content-Type: application/x-www-form-urlencoded\r\n{framing}\r\n\r\n").encode())  # fmt: skip
    try:
        for _ in range(total // len(CHUNK)):
            sock.sendall(f"{len(CHUNK):x}\r\n".encode() + CHUNK + b"\r\n" if chunked else CHUNK)
        if chunked:
            sock.sendall(b"0\r\n\r\n")
        head = sock.recv(4096)
    except OSError:  # refused early: the server closed while we were still sending
        try:
            head = sock.recv(4096)
        except OSError:
            return None
    finally:
        sock.close()
    return int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else None


def _peak_while(pid: int, send: Callable[[], object]) -> int:
    """How far the server's resident memory peaked above where it was, while ``send`` ran."""
    before = _kib(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    send()
    time.sleep(0.2)
    return _kib(pid, "VmHWM") - before


def _warm(url: str, pid: int) -> None:
    """Load the inspector (templates, jinja2) and let the server's background warm-up (the embedder,
    Chroma) finish before measuring: both cost memory of their own."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            assert httpx.get(f"{url}login", timeout=30).status_code == 200
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    quiet = 0
    while quiet < 2 and time.monotonic() < deadline:
        quiet = quiet + 1 if _peak_while(pid, lambda: time.sleep(0.5)) < PEAK_BOUND // 4 else 0
    assert quiet == 2, "the server's memory never settled"


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_memory_core_ui_refuses_a_256_mib_login_body_without_reading_it(tmp_path: Path, chunked: bool) -> None:
    with _ui(tmp_path) as (url, pid):
        _warm(url, pid)
        statuses: list[int | None] = []
        grew = _peak_while(pid, lambda: statuses.append(_post_login(url, chunked=chunked)))
        assert statuses[0] in (413, None)  # 413, or a reset if the refusal overtook the body still being sent
        assert grew < PEAK_BOUND, f"peak memory grew {grew / 2**20:.0f} MiB"
        assert httpx.get(f"{url}login", timeout=30).status_code == 200  # and it still serves


@pytest.mark.parametrize("chunked", [False, True], ids=["declared", "chunked"])
def test_serve_http_refuses_a_256_mib_login_body_without_reading_it(tmp_path: Path, chunked: bool) -> None:
    with _serve_http(tmp_path) as (url, pid):
        _warm(url, pid)
        statuses: list[int | None] = []
        grew = _peak_while(pid, lambda: statuses.append(_post_login(url, chunked=chunked)))
        assert statuses[0] in (413, None)
        assert grew < PEAK_BOUND, f"peak memory grew {grew / 2**20:.0f} MiB"


def test_serve_http_answers_413_as_soon_as_an_inspector_body_passes_a_login_forms_size(tmp_path: Path) -> None:
    """The inspector's cap, not the MCP endpoint's 4 MiB: 64 KiB sent, and the answer comes without the rest."""
    with _serve_http(tmp_path, MEMORY_CORE_SERVER_BODY_TIMEOUT_S="20") as (url, pid):
        _warm(url, pid)
        host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            body = b"token=" + b"x" * (64 * 1024)
            sock.sendall((f"POST /ui/login HTTP/1.1\r\nHost: {host}:{port}\r\nTransfer-Encoding: chunked\r\n"
                          "Content-Type: application/x-www-form-urlencoded\r\n\r\n").encode()
                         + f"{len(body):x}\r\n".encode() + body + b"\r\n")  # fmt: skip
            answer = b""
            while chunk := sock.recv(4096):  # the body is not finished: only a refusal can come back
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert b"REQUEST_TOO_LARGE" in answer and b"login form" in answer
