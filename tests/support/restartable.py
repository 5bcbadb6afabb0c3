"""A real ``memory-core serve --http`` that a test can SIGKILL and start again on the same port and data."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

from testbed.mcp_harness import ROOT, SERVER_COMMAND, _await_url, server_env
from testbed.processes import stop


class RestartableServer:
    """``start()`` on a free port, then ``restart()`` (SIGKILL, start again) keeps the URL."""

    def __init__(self, data_dir: Path, **env: str) -> None:
        self.data_dir = data_dir
        self.env = env
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0

    def start(self) -> str:
        args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1",
                "--port", str(self.port), "--data-dir", str(self.data_dir)]
        self.proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**self.env), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.url = _await_url(self.proc)
        self.port = urlparse(self.url).port or 0
        self.starts += 1
        return self.url

    def kill(self) -> None:
        """SIGKILL: no shutdown, no goodbye to the clients, as a crash or an OOM kill."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            stop(self.proc)  # closes its pipe

    def restart(self) -> str:
        before = self.url
        self.kill()
        url = self.start()
        assert url == before, (url, before)
        return url

    def stop(self) -> None:
        if self.proc is not None:
            stop(self.proc)
