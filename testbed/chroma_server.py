"""A real Chroma server (`chroma run`) for the client/server backend of the test suite.

``running_chroma(path)`` starts ``chroma run --path <path> --host 127.0.0.1 --port <free>``
with the ``chroma`` script installed next to the running interpreter, waits until
``GET /api/v2/heartbeat`` answers, yields ``(host, port)`` and stops the server on exit.
:class:`ChromaServer` also lets fault tests kill the server mid-run and start it again
on the same port and data path.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

HOST = "127.0.0.1"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0


def chroma_executable() -> Path:
    """The `chroma` CLI installed with chromadb in the same environment as this interpreter."""
    exe = Path(sys.executable).with_name("chroma")
    if not exe.exists():
        raise RuntimeError(f"No `chroma` CLI next to {sys.executable}; install chromadb into this environment.")
    return exe


def free_port(host: str = HOST) -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def heartbeat_ok(host: str, port: int, timeout: float = 1.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/v2/heartbeat", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class ChromaServer:
    """One `chroma run` process over a data path; can be killed and started again."""

    def __init__(self, path: str | os.PathLike[str], port: int | None = None, host: str = HOST) -> None:
        self.path = Path(path)
        self.host = host
        self.port = port or free_port(host)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start the server and wait for its heartbeat; raise with the log tail if it never comes."""
        if self.running:
            return
        self.path.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = tempfile.TemporaryFile(prefix="chroma-server-")  # noqa: SIM115 (closed in close())
        cmd = [str(chroma_executable()), "run", "--path", str(self.path), "--host", self.host,
               "--port", str(self.port)]
        self._proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"`chroma run` exited with {self._proc.returncode}:\n{self.log_tail()}")
            if heartbeat_ok(self.host, self.port):
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"`chroma run` gave no heartbeat within {timeout:.0f} s:\n{self.log_tail()}")

    def _signal(self, sig: signal.Signals) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)  # its own session: the server and anything it spawned
        except ProcessLookupError:
            return

    def stop(self) -> None:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        proc = self._proc
        if proc is None:
            return
        self._signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            proc.wait(STOP_TIMEOUT_S)
        self._proc = None

    def kill(self) -> None:
        """SIGKILL: the server disappears mid-run, as in a crash or a lost machine."""
        proc = self._proc
        if proc is None:
            return
        self._signal(signal.SIGKILL)
        proc.wait(STOP_TIMEOUT_S)
        self._proc = None

    def log_tail(self, chars: int = 4000) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        self._log.seek(0)
        text = self._log.read().decode("utf-8", "replace")
        self._log.seek(0, os.SEEK_END)
        return text[-chars:]

    def close(self) -> None:
        self.stop()
        if self._log is not None:
            self._log.close()
            self._log = None


@contextmanager
def chroma_server(path: str | os.PathLike[str]) -> Iterator[ChromaServer]:
    """A started :class:`ChromaServer`, stopped on exit (for tests that kill and restart it)."""
    server = ChromaServer(path)
    try:
        server.start()
        yield server
    finally:
        server.close()


@contextmanager
def running_chroma(path: str | os.PathLike[str]) -> Iterator[tuple[str, int]]:
    """A `chroma run` over ``path`` on 127.0.0.1 and a free port; yields ``(host, port)``."""
    with chroma_server(path) as server:
        yield server.address
