"""The shared server answers before its stores are open; a failed open is a coded tool error.

Real subprocesses throughout: the shared server started as a stdio launch starts it, the SDK's
real HTTP client with a bridge token or the real stdio bridge, and the operator's CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client

from testbed.mcp_harness import BASE_ENV, ROOT, Caller, error_code, http_client
from tests.tools.bridge.test_shared_server import CALL_TIMEOUT_S, bridged, stop_servers
from tools.bridge.locate import ensure_shared_server
from tools.server_record import BridgeBinding, bridge_token, read_announcement

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


def slow_server_command(data_dir: Path) -> list[str]:
    return [sys.executable, "-c", "from tests.support.slow_open import main; main()", "serve", "--http", "--shared",
            "--host", "127.0.0.1", "--port", "0", "--data-dir", str(data_dir), "--json"]


@pytest.mark.anyio
async def test_tools_list_answers_while_the_store_open_is_blocked_and_the_first_tool_call_then_succeeds(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    gate = tmp_path / "open-now"
    for key, value in {**BASE_ENV, "SLOW_OPEN_GATE": str(gate), "PYTHONPATH": str(ROOT)}.items():
        monkeypatch.setenv(key, value)
    with anyio.fail_after(CALL_TIMEOUT_S):
        found = await anyio.to_thread.run_sync(
            lambda: ensure_shared_server(data_dir, None, command=slow_server_command(data_dir)))
        async with http_client(found.url, bridge_token(found.secret, BridgeBinding("acme", None))) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"add_memory", "recall"} <= names and not gate.exists()  # answered; the open still waits
            async with anyio.create_task_group() as tasks:
                added: list[dict[str, object]] = []

                async def add() -> None:
                    added.append(await Caller(client, "acme", send_tenant=False).ok(
                        "add_memory", session="s", agent="a", content="written once the stores opened"))

                tasks.start_soon(add)
                await anyio.sleep(0.5)
                assert added == []  # the call waits for the open, it does not fail
                gate.touch()
            assert str(added[0]["ref"]).startswith("mem:")


@pytest.mark.anyio
async def test_a_failed_open_answers_the_first_tool_call_with_its_code_and_the_next_call_retries(
    data_dir: Path,
) -> None:
    data_dir.mkdir(parents=True)
    (data_dir / "graph.sqlite3").write_bytes(b"this is not a SQLite database" * 100)
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", idle_s=30)) as client:
            assert (await client.list_tools()).tools  # the server answers although its store cannot open
            caller = Caller(client, "acme", send_tenant=False)
            assert error_code(await caller.call("recall", query="anything")) == "STORE_ERROR"
            (data_dir / "graph.sqlite3").unlink()  # the lock is free again: the operator can repair
            added = await caller.ok("add_memory", session="s", agent="a", content="after the repair")
            assert str(added["ref"]).startswith("mem:")


@pytest.mark.anyio
async def test_an_operator_command_on_a_directory_the_shared_server_holds_names_it_and_how_to_stop_it(
    data_dir: Path,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", idle_s=30)) as client:
            await Caller(client, "acme", send_tenant=False).ok("add_memory", session="s", agent="a", content="x")
            server = read_announcement(data_dir)
            assert server is not None
            done = await anyio.to_thread.run_sync(lambda: subprocess.run(
                [sys.executable, "-m", "tools.cli", "stats", "-t", "acme", "--data-dir", str(data_dir), "--json"],
                capture_output=True, text=True, env={**BASE_ENV, "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                cwd=ROOT, timeout=120))
    assert done.returncode == 4
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "STORE_LOCKED"
    assert str(server.pid) in error["message"] and server.url in error["message"]
    assert f"kill {server.pid}" in error["message"] and server.secret not in done.stdout + done.stderr
