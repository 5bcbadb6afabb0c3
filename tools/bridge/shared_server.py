"""One shared MCP server per data directory: its announcement, its secret, and starting it.

Every ``memory-core serve --http`` announces itself in its data directory
(``mcp-server.json``, mode 0600: URL, pid and a fresh per-start secret) and withdraws the
file when it stops. A stdio launch (``memory-core serve``) reads the file and bridges to
that server (:mod:`tools.bridge.client`); when none runs it starts one, detached, on 127.0.0.1 and
a free port (``serve --http --shared``), which stops itself after ``server.shared_idle_s``
without clients. Two launches at once meet at a lock file (``mcp-server.start.lock``), so
they end with one server.

Bridged connections authenticate with a *bridge token*: the binding of the stdio client
(tenant and agent, ``None`` when unbound) signed with the directory's secret (HMAC-SHA256).
The server takes the binding from the token alone, so a bridged client cannot act outside
it; only a process that can read the 0600 file (the owner of the data directory) can mint one.

Stdlib only: the bridge imports this module and must start in a fraction of a second.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import hmac
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memory_core.errors import ConfigError, MemoryCoreError, StoreError, StoreLockedError

ANNOUNCEMENT = "mcp-server.json"
START_LOCK = "mcp-server.start.lock"
SERVER_LOG = "mcp-server.log"
START_OUTPUT = "mcp-server.out"
TOKEN_PREFIX = "mcb1."
START_TIMEOUT_S = 60.0
_BINDING_ENV = ("MEMORY_CORE_TENANT", "MEMORY_CORE_AGENT", "MEMORY_CORE_SERVER_TENANT", "MEMORY_CORE_SERVER_AGENT")


class SharedServerError(StoreError):
    """The shared server of a data directory could not be started or reached (CLI exit 4)."""

    code = "SERVER_UNAVAILABLE"


@dataclass(frozen=True)
class Announcement:
    """What a running server says about itself in its data directory."""

    url: str
    pid: int
    secret: str
    shared: bool

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 80


# ---- the announcement file -----------------------------------------------------------------
def announce(data_dir: Path, url: str, secret: str, *, shared: bool) -> None:
    """Write the announcement atomically, readable by the owner only (it holds the secret)."""
    body = json.dumps({"url": url, "pid": os.getpid(), "secret": secret, "shared": shared})
    tmp = data_dir / f".{ANNOUNCEMENT}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask or a leftover file said
        os.write(fd, body.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, data_dir / ANNOUNCEMENT)


def withdraw(data_dir: Path) -> None:
    """Remove the announcement if it is still this process's own."""
    found = read_announcement(data_dir)
    if found is not None and found.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (data_dir / ANNOUNCEMENT).unlink()


def read_announcement(data_dir: Path) -> Announcement | None:
    """The announcement, or None when there is none or it is unreadable/malformed."""
    try:
        raw = json.loads((data_dir / ANNOUNCEMENT).read_text())
        return Announcement(str(raw["url"]), int(raw["pid"]), str(raw["secret"]), bool(raw.get("shared")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def is_alive(found: Announcement, timeout_s: float = 1.0) -> bool:
    """True when the announced process exists and its socket accepts a connection."""
    try:
        os.kill(found.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's (cannot happen with a 0600 file we could read; harmless)
    try:
        with socket.create_connection(found.address, timeout=timeout_s):
            return True
    except OSError:
        return False


def live_announcement(data_dir: Path) -> Announcement | None:
    found = read_announcement(data_dir)
    return found if found is not None and is_alive(found) else None


# ---- bridge tokens -------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _sign(secret: str, payload: str) -> str:
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def bridge_token(secret: str, tenant: str | None, agent: str | None) -> str:
    """The bearer token of a bridged connection: its binding, signed with the directory's secret."""
    payload = _b64(json.dumps({"tenant": tenant, "agent": agent}, separators=(",", ":")).encode())
    return f"{TOKEN_PREFIX}{payload}.{_sign(secret, payload)}"


def read_bridge_token(secret: str, token: str) -> tuple[str | None, str | None] | None:
    """The (tenant, agent) a valid bridge token binds; None for anything else."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    payload, _, signature = token[len(TOKEN_PREFIX):].partition(".")
    if not hmac.compare_digest(_sign(secret, payload), signature):
        return None
    try:
        binding = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
    tenant, agent = binding.get("tenant"), binding.get("agent")
    if not all(value is None or isinstance(value, str) for value in (tenant, agent)):
        return None
    return tenant, agent


def new_secret() -> str:
    return secrets.token_hex(32)


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
    args = [sys.executable, "-c", "from tools.cli.app import main; main()", "serve", "--http", "--shared",
            "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir), "--json"]
    if config is not None:
        args += ["--config", str(config.resolve())]
    return args


def ensure_shared_server(data_dir: Path, config: Path | None, *, command: Sequence[str] | None = None) -> Announcement:
    """The live server of ``data_dir``: the announced one, or one started now (detached)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        found = live_announcement(data_dir)
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
    known: dict[str, type[MemoryCoreError]] = {StoreLockedError.code: StoreLockedError, ConfigError.code: ConfigError}
    if error.get("code") in known:
        return known[error["code"]](message, data_dir=str(data_dir))
    code = error.get("code", "unknown")
    return SharedServerError(f"The shared memory-core server for {data_dir} failed to start ({code}): {message}",
                             data_dir=str(data_dir), cause=code)
