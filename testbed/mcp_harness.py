"""Run the MCP server as a real subprocess and talk to it through the SDK's real client.

- ``stdio_params(data_dir, **env)``: spawn parameters for ``memory-core serve`` (``python -m tools.cli serve``).
- ``running_http_server(data_dir, config=..., env=...)``: start ``--http --port 0``, wait for
  the "listening on <url>" line on stderr, yield the URL, stop the process on exit.
- ``http_client(url, token)``: a ``Client`` over streamable HTTP with a bearer token.
- ``Caller``: one agent's view of the server, bound to a tenant (sent as an argument, or
  left to the connection's binding).

The server runs with the deterministic HashEmbedder so the suite stays fast and offline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult

from testbed.processes import stop
from tools.auth import hash_token

ROOT = Path(__file__).resolve().parents[1]
SERVER_COMMAND = ("-m", "tools.cli", "serve")  # ``memory-core serve`` without the installed script
START_TIMEOUT_S = 60.0
# Small enough that a few 2,000-char rows overflow it.
TEST_BUDGET_CHARS = 5000
BASE_ENV = {
    "MEMORY_CORE_EMBEDDING_PROVIDER": "hash",
    "MEMORY_CORE_RECALL_FULL_CONTENT_BUDGET_CHARS": str(TEST_BUDGET_CHARS),
    # stdio launches bridge to a shared background server: let it stop soon after a test's client leaves
    "MEMORY_CORE_SERVER_SHARED_IDLE_S": "5",
}


def stdio_params(data_dir: Path, **env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        # the in-process server: the stdio bridge to a shared server has its own suite (test_shared_server.py)
        args=[*SERVER_COMMAND, "--exclusive", "--data-dir", str(data_dir)],
        env={**BASE_ENV, **env},
        cwd=str(ROOT),
    )


def write_token_config(path: Path, tokens: dict[str, str]) -> Path:
    """A config file mapping sha256(token) -> tenant, as an operator writes it."""
    lines = ["[server.tokens]"] + [f'"{hash_token(token)}" = "{tenant}"' for token, tenant in tokens.items()]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def server_env(**env: str) -> dict[str, str]:
    """The parent's environment without MEMORY_CORE_* leaking in, plus the test settings."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    return {**clean, **BASE_ENV, **env}


@contextmanager
def running_http_server(
    data_dir: Path, *, config: Path | None = None, env: dict[str, str] | None = None
) -> Iterator[str]:
    """Start the streamable HTTP server on 127.0.0.1 and a free port; yield its URL."""
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0"]
    args += ["--data-dir", str(data_dir)]
    if config is not None:
        args += ["--config", str(config)]
    proc = subprocess.Popen(
        args, cwd=ROOT, env=server_env(**(env or {})), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield _await_url(proc)
    finally:
        stop(proc)


def _await_url(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None  # --announce prints the URL there; errors are merged in
    deadline = time.monotonic() + START_TIMEOUT_S
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server exited before listening: {''.join(seen)[-2000:]}")
        seen.append(line)
        if "listening on " in line:
            return line.rsplit("listening on ", 1)[1].strip()
    raise RuntimeError("the server did not start in time")


@asynccontextmanager
async def http_client(url: str, token: str | None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers) as http, Client(streamable_http_client(url, http_client=http)) as c:
        yield c


@dataclass
class Caller:
    """One agent of one tenant. ``send_tenant=False`` relies on the connection's binding."""

    client: Client
    tenant: str
    send_tenant: bool = True

    async def call(self, tool: str, **arguments: Any) -> CallToolResult:
        if self.send_tenant:
            arguments.setdefault("tenant", self.tenant)
        return await self.client.call_tool(tool, arguments)

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """Call and return the structured payload, failing the test on a tool error."""
        result = await self.call(tool, **arguments)
        assert not result.is_error, result.content
        assert result.structured_content is not None
        return result.structured_content


def error_code(result: CallToolResult) -> str:
    """The stable code of a tool error, after checking its shape: one line, no traceback."""
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "\n" not in text and "Traceback" not in text and 'File "' not in text, text
    code, _, sentence = text.partition(": ")
    assert code.isupper() and sentence.endswith("."), text
    assert (result.structured_content or {}).get("error", {}).get("code") == code
    return code
