"""An agent connected over streamable HTTP keeps working after the server is SIGKILLed and started again.

The server keeps no sessions (tools/serve/http.py), so there is no session id for the new process to
refuse with 404 — which no client of the transport recovers from by itself. Each test connects one real
client, calls a tool, restarts the server under it and calls again with the same client object, without
any reconnect by hand: the official Python SDK (in both its protocol modes), the official TypeScript
SDK, and the Claude Code CLI talking to a loopback stand-in for the model API.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from testbed.mcp_harness import http_client
from testbed.paths import ROOT
from tests.support.anthropic_standin import Reply, ToolUse, offered, standing_in, tool_results
from tests.support.restartable import RestartableServer

pytestmark = pytest.mark.slow

NODE_DIR = ROOT / "tests" / "support" / "node"
CLAUDE = NODE_DIR / "node_modules" / ".bin" / "claude"
TS_SDK = NODE_DIR / "node_modules" / "@modelcontextprotocol" / "sdk"
TENANT = "acme"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RestartableServer]:
    srv = RestartableServer(tmp_path / "data")
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


async def _contents(url: str, session: str) -> list[str]:
    """Every memory of ``session`` (an empty query returns the most recent ones)."""
    async with http_client(url, None) as client:
        result = await client.call_tool("recall", {"tenant": TENANT, "query": "", "session": session, "limit": 50})
        assert not result.is_error, result.content
        return sorted(str(row["content"]) for row in (result.structured_content or {})["messages"])


def stored(server: RestartableServer, session: str) -> list[str]:
    return asyncio.run(_contents(server.url, session))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_the_python_sdk_client_goes_on_working_across_a_restart(server: RestartableServer, mode: str) -> None:
    async def run() -> list[bool]:
        async with httpx2.AsyncClient() as http, \
                Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:  # type: ignore[arg-type]
            errors = []
            for step in ("before restart", "after restart", "after a second restart"):
                result = await client.call_tool("add_memory", {
                    "tenant": TENANT, "session": f"py-{mode}", "agent": "py", "content": f"python sdk {step}"})
                errors.append(bool(result.is_error))
                if step != "after a second restart":
                    await asyncio.to_thread(server.restart)
            return errors

    assert asyncio.run(run()) == [False, False, False]
    assert stored(server, f"py-{mode}") == [f"python sdk {s}" for s in
                                             ("after a second restart", "after restart", "before restart")]


def _node() -> str:
    node = shutil.which("node")
    if node is None or not TS_SDK.is_dir():
        pytest.skip("the TypeScript SDK is not installed: `make node-clients` (needs node and npm)")
    return node


def test_the_typescript_sdk_client_goes_on_working_across_a_restart(server: RestartableServer) -> None:
    proc = subprocess.Popen([_node(), str(NODE_DIR / "restart_client.mjs"), server.url, TENANT], cwd=NODE_DIR,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        before = json.loads(proc.stdout.readline())
        server.restart()
        proc.stdin.write("restarted\n")
        proc.stdin.flush()
        after = json.loads(proc.stdout.readline())
        done = json.loads(proc.stdout.readline())
        proc.wait(60)
    finally:
        proc.kill()
    assert before == {"step": "before restart", "isError": False, "text": before["text"]}
    assert after == {"step": "after restart", "isError": False, "text": after["text"]}, after
    assert done["sessionId"] is None and done["transportErrors"] == []  # no session, no stream to lose
    assert stored(server, "ts-session") == ["typescript sdk after restart", "typescript sdk before restart"]


def test_claude_code_goes_on_working_across_a_restart(server: RestartableServer, tmp_path: Path) -> None:
    if not CLAUDE.exists():
        pytest.skip("Claude Code is not installed: `make node-clients` (needs npm)")
    add = "mcp__memory__add_memory"

    def script(body: dict[str, Any]) -> Reply:
        if add not in offered(body):
            return "ok"  # a request of Claude Code's own (none is expected with non-essential traffic off)
        done = tool_results(body)
        if len(done) == 1:
            server.restart()  # between its two calls: Claude Code holds its MCP connection all along
        if len(done) < 2:
            step = "before restart" if not done else "after restart"
            return [ToolUse(add, {"tenant": TENANT, "session": "claude-session", "agent": "claude",
                                  "content": f"claude code {step}"})]
        return "stored: " + json.dumps(done)

    home = tmp_path / "home"
    home.mkdir()
    config = {"mcpServers": {"memory": {"type": "http", "url": server.url}}}
    with standing_in(script) as api:
        env = {**{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))},
               "HOME": str(home), "ANTHROPIC_BASE_URL": api.base_url, "ANTHROPIC_API_KEY": "sk-ant-stand-in",
               "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
        run = subprocess.run([str(CLAUDE), "-p", "Store two memories.", "--mcp-config", json.dumps(config),
                              "--strict-mcp-config", "--allowedTools", add, "--output-format", "json"],
                             cwd=home, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    final = json.loads(run.stdout)
    assert final["is_error"] is False and final["num_turns"] == 3, final
    results = tool_results(api.requests[-1])
    assert len(results) == 2 and not any(r.get("is_error") for r in results), results
    assert all('"created":true' in json.dumps(r["content"]).replace('\\"', '"') for r in results), results
    assert server.starts == 2
    assert stored(server, "claude-session") == ["claude code after restart", "claude code before restart"]
