"""Raw HTTP against a real server subprocess, for tests that must forge headers or bodies.

- ``serving(host, data_dir, **env)``: ``memory-core serve --http --announce --host HOST --port 0``;
  yields the announced URL and stops the process on exit.
- ``RawSession(url)``: an initialized MCP session over plain httpx; ``call`` sends one
  ``tools/call`` with any extra headers.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from testbed.mcp_harness import ROOT, SERVER_COMMAND, _await_url, server_env
from testbed.processes import stop

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@contextmanager
def serving(host: str, data_dir: Path, **env: str) -> Iterator[str]:
    """``serve --http --host HOST --port 0`` as a subprocess; yields the announced URL."""
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", host, "--port", "0",
            "--data-dir", str(data_dir)]  # fmt: skip
    proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**env), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        yield _await_url(proc)
    finally:
        stop(proc)


class RawSession:
    """An initialized MCP session over plain httpx, so each request's headers can be forged."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.http = httpx.Client(timeout=30)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "rebinding-test", "version": "1"}}}  # fmt: skip
        response = self.http.post(url, json=init, headers=ACCEPT)
        assert response.status_code == 200, response.text
        self.session = response.headers.get("mcp-session-id")  # None: the server keeps no sessions (stateless)
        done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert self.http.post(url, json=done, headers=self._headers({})).status_code == 202

    def session_headers(self) -> dict[str, str]:
        """The session's header, if the server issued one (a stateless server issues none)."""
        return {"mcp-session-id": self.session} if self.session else {}

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        return {**ACCEPT, **self.session_headers(), **extra}

    def call(self, tool: str, arguments: dict[str, Any], **headers: str) -> httpx.Response:
        body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        return self.http.post(self.url, json=body, headers=self._headers(headers))
