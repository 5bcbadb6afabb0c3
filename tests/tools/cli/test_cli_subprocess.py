"""`memory-core` as a real subprocess: the installed entry point, pipes, exit codes, serve."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_core import MemoryCore
from memory_core.settings import load_settings
from testbed.mcp_harness import http_client
from testbed.paths import ROOT

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

BIN = Path(sys.executable).with_name("memory-core")
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")},
       "MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def cli(*args: str, data_dir: Path, input: str | None = None, code: int = 0) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(BIN), *args, "--data-dir", str(data_dir)], input=input, capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    return proc


def cli_json(*args: str, data_dir: Path, input: str | None = None, code: int = 0) -> Any:
    return json.loads(cli(*args, "--json", data_dir=data_dir, input=input, code=code).stdout)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    settings = load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})
    with MemoryCore.open(path, settings=settings) as core:
        for i in range(5):
            core.add_memory("acme", "s1", "alice", f"turn {i} about the orchard and its apples", role="user",
                            timestamp="2026-03-01T10:00:00+00:00" if i < 3 else None)
        core.create_handoff("acme", "s1", "alice", "handoff: apples next")
        core.add_memory("globex", "g1", "zed", "globex apples are secret")
    return path


def test_the_entry_point_adds_recalls_and_maps_errors_to_exit_codes(store: Path) -> None:
    added = cli_json("add", "-t", "acme", "-s", "s2", "-a", "bob", "-", data_dir=store, input="piped pear note")
    rows = cli_json("recall", "pear note", "-t", "acme", data_dir=store)["messages"]
    assert rows[0]["ref"] == added["ref"] and rows[0]["content"] == "piped pear note"
    missing = cli("recall", "x", data_dir=store, code=2)
    assert missing.stderr.strip() == "memory-core: TENANT_REQUIRED: A tenant is required on every call."
    assert "Traceback" not in missing.stderr
    assert cli_json("show", "mem:4242", "-t", "acme", data_dir=store, code=3)["error"]["code"] == "NOT_FOUND"


def test_export_piped_into_import_rebuilds_an_identical_tenant_and_reimport_writes_nothing(
    store: Path, tmp_path: Path
) -> None:
    exported = cli("export", "-t", "acme", data_dir=store).stdout
    lines = [json.loads(line) for line in exported.splitlines()]
    assert len(lines) == 6 and {line["tenant"] for line in lines} == {"acme"}
    empty = tmp_path / "empty"
    counts = cli_json("import", "-", "-t", "acme", data_dir=empty, input=exported)
    assert (counts["written"], counts["errors"]) == (6, 0)
    assert cli("export", "-t", "acme", data_dir=empty).stdout == exported
    want = cli_json("recall", "orchard apples", "-t", "acme", data_dir=store)["messages"]
    got = cli_json("recall", "orchard apples", "-t", "acme", data_dir=empty)["messages"]
    assert [(m["ref"], m["content"]) for m in got] == [(m["ref"], m["content"]) for m in want]
    again = cli_json("import", "-", "-t", "acme", data_dir=empty, input=exported)
    assert (again["written"], again["skipped"]) == (0, 6)


def test_doctor_repairs_a_planted_inconsistency_across_processes(store: Path) -> None:
    with MemoryCore.open(store, settings=load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})) as core:
        core._vectors.delete("acme", ["mem:1"])
    found = cli_json("doctor", data_dir=store, code=1)
    assert [(f["kind"], f["ref"]) for f in found["findings"]] == [("vector_missing", "mem:1")]
    repaired = cli("doctor", "--repair", data_dir=store).stdout
    assert "re-embedded" in repaired and repaired.strip().endswith("All stores agree.")


@pytest.fixture
def http_server(store: Path) -> Iterator[tuple[dict[str, Any], subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [str(BIN), "serve", "--http", "--host", "127.0.0.1", "--port", "0", "--announce", "--json",
         "--data-dir", str(store)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    line = ""
    while not line and time.monotonic() < deadline and proc.poll() is None:
        line = proc.stdout.readline()
    assert line, proc.stderr.read() if proc.stderr else "no announcement"
    try:
        yield json.loads(line), proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        proc.stdout.close()
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.anyio
async def test_serve_http_announces_its_url_and_a_client_config_then_serves_mcp(
    http_server: tuple[dict[str, Any], subprocess.Popen[str]],
) -> None:
    announced, _proc = http_server
    url = announced["url"]
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    assert announced["client_config"] == {"mcpServers": {"memory-core": {"type": "http", "url": url}}}
    async with http_client(url, None) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"recall", "add_memory", "recover_context"} <= names
        result = await client.call_tool("recall", {"tenant": "acme", "query": "orchard"})
        assert not result.is_error and "orchard" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_serve_defaults_to_stdio(store: Path) -> None:
    params = StdioServerParameters(command=str(BIN), args=["serve", "--data-dir", str(store)], env=ENV, cwd=str(ROOT))
    async with Client(params) as client:
        result = await client.call_tool("recall", {"tenant": "globex", "query": "apples"})
        assert not result.is_error and "globex apples are secret" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.slow
def test_serve_http_announces_the_inspector_url_and_that_it_is_off_without_an_operator_token(
    http_server: tuple[dict[str, Any], subprocess.Popen[str]],
) -> None:
    announced, _proc = http_server
    base = announced["url"].removesuffix("/mcp")
    assert announced["inspector"] == {"url": f"{base}/ui/", "enabled": False,
                                      "enable": "memory-core token --operator"}


@pytest.mark.parametrize("enabled", [True, False])
def test_the_human_announcement_names_the_inspector_url_and_whether_it_is_on(
    enabled: bool, capsys: pytest.CaptureFixture[str],
) -> None:
    from tools.cli.serve import _announce_http

    _announce_http("http://127.0.0.1:8765/mcp", with_tokens=False, json_out=False, inspector=enabled)
    out = capsys.readouterr().out
    assert "http://127.0.0.1:8765/ui/" in out
    assert ("operator token" in out) and (("off until" in out) != enabled)
