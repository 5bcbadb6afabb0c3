"""Finding the data directory's shared server, trusting it, and starting it when none runs.

A stdio launch (``memory-core serve``) reads the record a running ``serve --http`` keeps in the
data directory (:mod:`tools.server_record`) and bridges to that server (:mod:`tools.bridge.client`);
when none runs it starts one, detached, on 127.0.0.1 and a free port (``serve --http --shared``),
which stops itself after ``server.shared_idle_s`` without clients. Two launches at once meet at a
lock file (``mcp-server.start.lock``), so they end with one server.

The client authenticates the server before it sends it anything: on every connection it first
asks ``GET /mcp-bridge/hello?nonce=…`` and expects ``HMAC(secret, port|nonce)``
(:func:`connect_verified`); only then does the bearer token or any content go out, on that same
connection. A stale record (a server killed with SIGKILL) whose pid and port now belong to someone
else's process is therefore ignored: the client starts its own server. A record that is not this
user's own, or that others may read, is not trusted either (docs/shared-server.md).

Stdlib only: the bridge imports this module and must start in a fraction of a second.
"""

from __future__ import annotations

import contextlib
import fcntl
import hmac
import http.client
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from memory_core import ConfigError, EmbedderMismatchError, MemoryCoreError, StoreError, StoreLockedError
from tools.server_record import ANNOUNCEMENT, HELLO_PATH, Announcement, read_announcement, server_proof

START_LOCK = "mcp-server.start.lock"
SERVER_LOG = "mcp-server.log"
START_OUTPUT = "mcp-server.out"
MAX_HELLO_BYTES = 1024  # the proof's answer is ~80 bytes; an impostor may send anything
START_TIMEOUT_S = 60.0
_BINDING_ENV = ("MEMORY_CORE_TENANT", "MEMORY_CORE_AGENT", "MEMORY_CORE_SCOPE", "MEMORY_CORE_SERVER_TENANT",
                "MEMORY_CORE_SERVER_AGENT", "MEMORY_CORE_SERVER_SCOPE")


class SharedServerError(StoreError):
    """The shared server of a data directory could not be started or reached (CLI exit 4)."""

    code = "SERVER_UNAVAILABLE"


class UnprovenServer(OSError):
    """The announced address did not prove that it is the announced server: gone, or someone else."""

    def __init__(self, found: Announcement, *, impostor: bool) -> None:
        what = "answered without the record's secret" if impostor else "did not answer"
        super().__init__(f"{found.url} {what}")
        self.found = found
        self.impostor = impostor  # something listens there and failed the proof


def connect_verified(found: Announcement, timeout_s: float) -> http.client.HTTPConnection:
    """A connection on which the announced server has just proved that it holds the record's secret.

    Nothing goes out before the proof but a fresh nonce: no token, no content. The connection
    never reopens by itself (``auto_open`` off), so what is sent on it next reaches the process
    that gave the proof. Raises :class:`UnprovenServer`.
    """
    host, port = found.address
    conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
    nonce = secrets.token_hex(16)
    try:
        conn.connect()
        assert conn.sock is not None
        # http.client writes a request's headers and body apart: with Nagle's algorithm the body of
        # the second request on a connection waits for the server's delayed ACK (40 ms on Linux)
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.request("GET", f"{HELLO_PATH}?nonce={nonce}")
        response = conn.getresponse()
        length = response.length
        body = response.read() if response.status == 200 and length is not None and length <= MAX_HELLO_BYTES else b""
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        raise UnprovenServer(found, impostor=False) from exc
    try:
        proof = json.loads(body)["proof"]
    except (ValueError, KeyError, TypeError):
        proof = None
    if not isinstance(proof, str) or not hmac.compare_digest(proof, server_proof(found.secret, nonce, port)):
        conn.close()
        raise UnprovenServer(found, impostor=True)
    conn.auto_open = 0
    return conn


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's: only the proof can tell whether it is the server
    return True


def is_alive(found: Announcement, timeout_s: float = 1.0) -> bool:
    """True when the announced server runs and proves, on its port, that it holds the record's secret."""
    return _verdict(found, timeout_s) is None


def _verdict(found: Announcement, timeout_s: float) -> UnprovenServer | None:
    """None for the announced server, alive; else why not."""
    if not _pid_exists(found.pid):
        return UnprovenServer(found, impostor=False)
    try:
        connect_verified(found, timeout_s).close()
    except UnprovenServer as exc:
        return exc
    return None


def live_announcement(data_dir: Path, say: Callable[[str], None] | None = None) -> Announcement | None:
    """The announcement of a live server that proved itself; None otherwise (``say`` hears of impostors).

    A record that is not this user's own, or that others may read or write, is not trusted
    either: its secret is no longer a secret.
    """
    found = read_announcement(data_dir)
    if found is None:
        return None
    loose = _loose(data_dir / ANNOUNCEMENT)
    if loose is not None:
        if say is not None:
            say(f"{data_dir / ANNOUNCEMENT} is {loose}; its server is not trusted (remove the file, or make the data "
                "directory private).")
        return None
    failed = _verdict(found, 1.0)
    if failed is None:
        return found
    if failed.impostor and say is not None:
        say(f"{found.url} (recorded in {data_dir / ANNOUNCEMENT}, pid {found.pid}) did not prove it holds the "
            "record's secret; it was sent nothing, and this client uses a server of its own.")
    return None


def _loose(path: Path) -> str | None:
    """Why a record cannot be trusted (another user's, or open to others); None when it is private."""
    try:
        info = path.stat()
    except OSError:
        return None  # gone meanwhile: nothing is trusted anyway
    if info.st_uid != os.getuid():
        return f"owned by uid {info.st_uid}, not by this user"
    if info.st_mode & 0o077:
        return f"open to other users (mode {info.st_mode & 0o777:o})"
    return None


def say_on_stderr(text: str) -> None:
    """One line for the person running the stdio client (its MCP client logs the server's stderr)."""
    with contextlib.suppress(OSError):
        sys.stderr.write(f"memory-core: {text}\n")
        sys.stderr.flush()


# ---- starting the shared server ------------------------------------------------------------
@contextlib.contextmanager
def _start_lock(data_dir: Path) -> Iterator[None]:
    """Serialises starts: the second of two simultaneous launches finds the first one's server."""
    fd = os.open(data_dir / START_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def server_command(data_dir: Path, config: Path | None) -> list[str]:
    """The detached background server: ``memory-core serve --http --shared`` on a free loopback port."""
    # ``python -P -m memory_core``: neither the launcher's working directory nor a PYTHONPATH holding
    # other ``tools``/``graph`` packages can shadow ours (memory_core.launcher)
    args = [sys.executable, "-P", "-m", "memory_core", "serve", "--http", "--shared", "--host", "127.0.0.1",
            "--port", "0", "--data-dir", str(data_dir), "--json"]
    if config is not None:
        args += ["--config", str(config.resolve())]
    return args


def ensure_shared_server(data_dir: Path, config: Path | None, *, command: Sequence[str] | None = None,
                         say: Callable[[str], None] | None = say_on_stderr) -> Announcement:
    """The live server of ``data_dir``: the announced one (once it proved itself), or one started now (detached)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        found = live_announcement(data_dir, say)
        if found is not None:
            return found
        with _start_lock(data_dir):
            found = live_announcement(data_dir)  # another launch may have started it while we waited
            if found is not None:
                return found
            return _start(data_dir, list(command or server_command(data_dir, config)))
    except OSError as exc:  # an unwritable or missing data directory, no room for the lock file, …
        raise SharedServerError(f"Cannot start the shared memory-core server in {data_dir}: "
                                f"{exc.strerror or exc}.", data_dir=str(data_dir)) from exc


def head_start(data_dir: Path, config: Path | None) -> Callable[[], Announcement]:
    """Find or start the server now, on a thread, while the launch goes on loading its settings.

    The returned ``locate`` waits for that first attempt and returns (or raises) its outcome;
    later calls (after a restart) find or start the server afresh.
    """
    outcome: list[Announcement | MemoryCoreError] = []

    def first() -> None:
        try:
            outcome.append(ensure_shared_server(data_dir, config))
        except MemoryCoreError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=first, name="memory-core-head-start", daemon=True)
    thread.start()

    def locate() -> Announcement:
        thread.join()
        if not outcome:
            return ensure_shared_server(data_dir, config)
        found = outcome.pop()
        if isinstance(found, MemoryCoreError):
            raise found
        return found

    return locate


def _start(data_dir: Path, command: list[str]) -> Announcement:
    # The binding is per connection (in each bridge token), never the first launcher's.
    env = {k: v for k, v in os.environ.items() if k not in _BINDING_ENV}
    out_path = data_dir / START_OUTPUT
    private = 0o600  # the log may quote memory content
    log_fd = os.open(data_dir / SERVER_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, private)
    out_fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, private)
    with os.fdopen(log_fd, "ab") as log, os.fdopen(out_fd, "wb") as out:
        proc = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=out, stderr=log, env=env, start_new_session=True,
            close_fds=True,
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        found = read_announcement(data_dir)
        if found is not None and found.pid == proc.pid and is_alive(found):
            return found
        if proc.poll() is not None:
            raise _start_failure(out_path, data_dir)
        time.sleep(0.02)
    proc.kill()
    raise SharedServerError(
        f"The shared memory-core server for {data_dir} did not start within {START_TIMEOUT_S:g} s; "
        f"see {data_dir / SERVER_LOG}.", data_dir=str(data_dir))


def _start_failure(out_path: Path, data_dir: Path) -> MemoryCoreError:
    """The coded error the background server printed (``--json``) before it exited."""
    error: dict[str, str] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in out_path.read_text().splitlines():
            parsed = json.loads(line)
            if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
                error = parsed["error"]
    message = str(error.get("message") or f"see {data_dir / SERVER_LOG}")
    known: dict[str, type[MemoryCoreError]] = {StoreLockedError.code: StoreLockedError, ConfigError.code: ConfigError,
                                              EmbedderMismatchError.code: EmbedderMismatchError}
    if error.get("code") in known:
        return known[error["code"]](message, data_dir=str(data_dir))
    code = error.get("code", "unknown")
    return SharedServerError(f"The shared memory-core server for {data_dir} failed to start ({code}): {message}",
                             data_dir=str(data_dir), cause=code)
