"""Ending the subprocesses tests start (servers, a browser): politely, then for sure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path
from typing import Any


def stop(proc: subprocess.Popen[Any], timeout_s: float = 10) -> None:
    """SIGTERM, wait up to ``timeout_s``, then SIGKILL; close the pipes the test held."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def shared_servers(data_dir: Path) -> list[int]:
    """Pids of the background servers (``serve --http --shared``) serving ``data_dir`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"--shared" in args and str(data_dir).encode() in args:
            found.append(int(entry.name))
    return found


def stop_shared_servers(data_dir: Path) -> None:
    """Kill the background servers a test's bridged clients started on ``data_dir``."""
    for pid in shared_servers(data_dir):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
