"""Traces: a span per tool call with memory-core's attributes, a child per stage, over OTLP/HTTP;
and with tracing off (or OpenTelemetry's SDK absent), no import and no span of ours.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from memory_core.observe.logs import tenant_label
from testbed.mcp_harness import ROOT, SERVER_COMMAND, Caller, _await_url, http_client, server_env
from testbed.processes import stop
from tests.support.otlp_receiver import receiving

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"


async def _calls(url: str) -> None:
    async with http_client(url, None) as client:
        agent = Caller(client, "acme")
        await agent.ok("add_memory", session="s1", agent="a1", content="traces show where time went")
        await agent.ok("recall", query="where did the time go")


@pytest.mark.slow
def test_a_tool_call_is_a_span_with_its_stages_as_children_and_follows_the_callers_traceparent(
        tmp_path: Path) -> None:
    with receiving() as otlp:
        args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
                "--data-dir", str(tmp_path / "data")]
        env = server_env(MEMORY_CORE_TRACING_ENABLED="true", MEMORY_CORE_TRACING_ENDPOINT=otlp.endpoint,
                         MEMORY_CORE_TRACING_SERVICE_NAME="memory-core-test")
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            url = _await_url(proc)
            asyncio.run(_calls(url))
            traced = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
                "name": "recall", "arguments": {"tenant": "acme", "query": "traced"},
                "_meta": {"traceparent": f"00-{TRACE_ID}-{PARENT}-01"}}}
            httpx.post(url, json=traced, timeout=30,
                       headers={"Accept": "application/json, text/event-stream"}).raise_for_status()
        finally:
            stop(proc)  # SIGTERM: what is still buffered is exported before the process ends
        recalls = otlp.wait_for("tools/call recall")
        adds = otlp.wait_for("tools/call add_memory")
    assert all(s.service == "memory-core-test" for s in otlp.spans)
    add = adds[0]
    assert add.attributes["memory_core.outcome"] == "ok" and add.attributes["memory_core.tool"] == "add_memory"
    assert add.attributes["memory_core.tenant"] == tenant_label("acme", "hash")
    assert add.attributes["memory_core.wait.group_commit_ms"] >= 0
    assert add.attributes["memory_core.request_id"]
    recall = next(s for s in recalls if s.trace_id != TRACE_ID)
    children = {s.name: s for s in otlp.spans if s.parent_id == recall.span_id}
    assert {"recall.embed", "recall.vector", "recall.rank"} <= set(children), sorted(children)
    for child in children.values():
        assert child.trace_id == recall.trace_id and recall.start_ns <= child.start_ns <= child.end_ns <= recall.end_ns
    followed = next(s for s in recalls if s.trace_id == TRACE_ID)  # the agent's trace goes on in the server
    assert followed.parent_id == PARENT
    assert "acme" not in str([s.attributes for s in otlp.spans])  # the tenant is hashed, as in the logs


_BLOCK_SDK = """
import importlib.abc, sys
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.startswith(("opentelemetry.sdk", "opentelemetry.exporter")):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
"""

_BUILD = """
import sys
from memory_core.observe.observer import Observer
from memory_core.settings import load_settings
from tools.mcp.server import build_server
from tools.mcp.stores import OpenedCore
from opentelemetry import trace
observer = Observer.from_settings(load_settings(environ={}), tools=["recall"], version="t")
build_server(load_settings(environ={}), OpenedCore(None), observer=observer)
print(sorted(m for m in ("memory_core.observe.tracing", "memory_core.observe.metrics", "prometheus_client",
                         "opentelemetry.sdk") if m in sys.modules), type(trace.get_tracer_provider()).__name__)
"""


@pytest.mark.parametrize("absent", [False, True], ids=["sdk installed", "sdk absent"])
def test_tracing_off_imports_nothing_of_it_and_sets_no_provider(absent: bool) -> None:
    code = (_BLOCK_SDK if absent else "") + _BUILD
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=server_env(), capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["[]", "ProxyTracerProvider"]


def test_tracing_on_without_the_sdk_refuses_to_start_naming_the_extra(tmp_path: Path) -> None:
    code = _BLOCK_SDK + "from tools.cli.app import main\nsys.argv = ['memory-core', *sys.argv[1:]]\nmain()\n"
    run = subprocess.run([sys.executable, "-c", code, "serve", "--http", "--port", "0", "--data-dir",
                          str(tmp_path / "d")], cwd=ROOT, env=server_env(MEMORY_CORE_TRACING_ENABLED="true"),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 5 and "CONFIG_INVALID" in run.stderr and "memory-core[otel]" in run.stderr, run.stderr
    assert not (tmp_path / "d").exists()  # refused before anything was opened
