"""Ending the subprocesses tests start (servers, a browser): politely, then for sure."""

from __future__ import annotations

import subprocess
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
