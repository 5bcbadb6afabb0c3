"""Many stdio clients on one data directory share one background server, through real subprocesses.

Every client here is the SDK's real stdio client running ``memory-core serve`` (the bridge);
the first one starts the shared server, later ones join it.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from testbed.mcp_harness import BASE_ENV, ROOT, Caller, error_code, stdio_params
from testbed.processes import shared_servers, stop_shared_servers
from tests.support.mcp_contract import ToolContract
from tools.bridge.locate import is_alive, live_announcement
from tools.server_record import ANNOUNCEMENT, BridgeBinding, bridge_token, read_announcement

CALL_TIMEOUT_S = 90  # every step that waits is bounded: a hang fails the test


def bridged(data_dir: Path, *extra: str, idle_s: float = 3.0, **env: str) -> StdioServerParameters:
    """A stdio client config as Claude Desktop, Claude Code or Cursor writes it: ``memory-core serve``."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tools.cli.app import main; main()", "serve", "--data-dir", str(data_dir), *extra],
        env={**BASE_ENV, "MEMORY_CORE_SERVER_SHARED_IDLE_S": str(idle_s), **env},
        cwd=str(ROOT),
    )


def stop_servers(data_dir: Path) -> None:
    stop_shared_servers(data_dir)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["legacy", "auto"])
def era(request: pytest.FixtureRequest) -> str:
    """Both protocol eras: the initialize handshake with a session (today's desktop clients) and the
    2026-07-28 self-contained requests the SDK's client negotiates by default."""
    return str(request.param)


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


# ---- the whole contract holds through the bridge ----------------------------------------------
@pytest.fixture(scope="module", params=["legacy", "auto"])
async def bridged_client(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest,
                         ) -> AsyncIterator[Client]:
    root = tmp_path_factory.mktemp("bridged") / "data"
    try:
        async with Client(bridged(root, idle_s=30), mode=request.param) as client:
            yield client
    finally:
        stop_servers(root)


@pytest.fixture(scope="module")
def acme(bridged_client: Client) -> Caller:
    return Caller(bridged_client, "acme")


@pytest.fixture(scope="module")
def beta(bridged_client: Client) -> Caller:
    return Caller(bridged_client, "beta")


class TestToolsOverTheBridge(ToolContract):
    """Every tool behaviour of the contract, through stdio → bridge → shared HTTP server."""


# ---- many clients, one store ------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_three_stdio_clients_on_one_data_directory_read_each_others_writes_at_once(
    data_dir: Path, era: str,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with (
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="desktop"), mode=era) as desktop,
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="code"), mode=era) as code,
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="cursor"), mode=era) as cursor,
        ):
            clients = {"desktop": desktop, "code": code, "cursor": cursor}
            refs = {}
            for name, client in clients.items():
                added = await Caller(client, "acme", send_tenant=False).ok(
                    "add_memory", session="shared", content=f"{name} decided the release date")
                refs[name] = added["ref"]
            for client in clients.values():
                found = await Caller(client, "acme", send_tenant=False).ok("get_contents", refs=list(refs.values()))
                assert {row["agent"] for row in found["found"]} == set(clients)
            assert len(shared_servers(data_dir)) == 1


@pytest.mark.slow
@pytest.mark.anyio
async def test_two_launches_at_once_end_with_one_background_server(data_dir: Path) -> None:
    seen: list[str] = []

    async def launch(agent: str) -> None:
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT=agent)) as client:
            seen.append((await Caller(client, "acme", send_tenant=False).ok(
                "add_memory", session="s", content=f"from {agent}"))["ref"])
            await anyio.sleep(1.0)  # both connected at once
            assert len(shared_servers(data_dir)) == 1

    with anyio.fail_after(CALL_TIMEOUT_S):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(launch, "one")
            tasks.start_soon(launch, "two")
    assert sorted(seen) == ["mem:1", "mem:2"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_bridged_client_bound_to_one_tenant_cannot_read_another(data_dir: Path, era: str) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with (
            Client(bridged(data_dir, MEMORY_CORE_TENANT="tenant-a"), mode=era) as a,
            Client(bridged(data_dir, MEMORY_CORE_TENANT="tenant-b"), mode=era) as b,
        ):
            secret = (await Caller(b, "tenant-b", send_tenant=False).ok(
                "add_memory", session="s", agent="bob", content="tenant b's launch codes"))["ref"]
            assert error_code(await a.call_tool("recall", {"query": "launch codes", "tenant": "tenant-b"})) == (
                "TENANT_MISMATCH")
            as_a = Caller(a, "tenant-a", send_tenant=False)
            assert (await as_a.ok("get_contents", refs=[secret]))["missing"] == [secret]
            assert (await as_a.ok("recall", query="launch codes"))["messages"] == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_an_agent_binding_travels_with_each_bridged_connection(data_dir: Path) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with (
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="alice")) as alice,
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="bob")) as bob,
        ):
            private = (await Caller(alice, "acme", send_tenant=False).ok(
                "add_memory", session="s", content="alice's scratch note", visibility="agent"))["ref"]
            as_bob = Caller(bob, "acme", send_tenant=False)
            assert (await as_bob.ok("get_contents", refs=[private]))["missing"] == [private]
            assert error_code(await as_bob.call("get_contents", refs=[private], viewer="alice")) == "AGENT_MISMATCH"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_killed_background_server_is_restarted_transparently_on_the_next_call(
    data_dir: Path, era: str,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme"), mode=era) as client:
            caller = Caller(client, "acme", send_tenant=False)
            ref = (await caller.ok("add_memory", session="s", agent="a", content="written before the crash"))["ref"]
            first = read_announcement(data_dir)
            assert first is not None
            os.kill(first.pid, signal.SIGKILL)
            while is_alive(first):
                await anyio.sleep(0.05)
            again = await caller.ok("add_memory", session="s", agent="a", content="written after the crash")
            assert again["ref"] != ref
            found = await caller.ok("get_contents", refs=[ref])
            assert [row["content"] for row in found["found"]] == ["written before the crash"]
            second = live_announcement(data_dir)
            assert second is not None and second.pid != first.pid and second.secret != first.secret


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_background_server_stops_itself_once_no_client_is_connected(data_dir: Path, era: str) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme", idle_s=1), mode=era) as client:
            await Caller(client, "acme", send_tenant=False).ok("add_memory", session="s", agent="a", content="x")
            await anyio.sleep(2.5)  # longer than the idle period: an open client keeps it running
            assert shared_servers(data_dir)
        while shared_servers(data_dir) or (data_dir / ANNOUNCEMENT).exists():
            await anyio.sleep(0.2)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_directory_held_by_an_exclusive_server_answers_store_locked_not_a_dropped_connection(
    data_dir: Path,
) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(stdio_params(data_dir)):
            with pytest.raises(BaseExceptionGroup) as failed:  # the SDK client raises the initialize error
                async with Client(bridged(data_dir)):
                    pass
    errors = [leaf for leaf in leaves(failed.value) if isinstance(leaf, MCPError)]
    assert [error.data["code"] for error in errors] == ["STORE_LOCKED"]


def leaves(error: BaseException) -> Iterator[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            yield from leaves(inner)
    else:
        yield error


# ---- the announcement and the secret ----------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_the_shared_server_listens_on_loopback_and_refuses_requests_without_its_secret(data_dir: Path) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme")):
            path = data_dir / ANNOUNCEMENT
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            found = read_announcement(data_dir)
            assert found is not None and found.shared and found.address[0] == "127.0.0.1"
            body = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            headers = {"Accept": "application/json, text/event-stream"}
            forged = bridge_token("not-the-secret", BridgeBinding(None, None))
            tampered = bridge_token(found.secret, BridgeBinding("acme", None)).replace("mcb1.", "mcb1.x", 1)
            async with httpx2.AsyncClient(timeout=10) as http:
                for token in (None, "some-token", forged, tampered):
                    auth = {"Authorization": f"Bearer {token}"} if token else {}
                    answer = await http.post(found.url, json=body, headers={**headers, **auth})
                    assert answer.status_code == 401, (token, answer.text)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_stdio_launch_joins_a_running_http_server_instead_of_failing(data_dir: Path, tmp_path: Path) -> None:
    from testbed.mcp_harness import http_client, running_http_server

    with running_http_server(data_dir) as url, anyio.fail_after(CALL_TIMEOUT_S):
        async with http_client(url, None) as direct:
            ref = (await Caller(direct, "acme").ok("add_memory", session="s", agent="a", content="via http"))["ref"]
        async with Client(bridged(data_dir, MEMORY_CORE_TENANT="acme")) as client:
            found = await Caller(client, "acme", send_tenant=False).ok("get_contents", refs=[ref])
            assert [row["content"] for row in found["found"]] == ["via http"]
        assert shared_servers(data_dir) == []
        announced = json.loads((data_dir / ANNOUNCEMENT).read_text())
        assert announced["shared"] is False


@pytest.mark.slow
@pytest.mark.anyio
async def test_bridged_clients_join_a_server_with_configured_tokens_and_keep_their_own_binding(
    data_dir: Path, tmp_path: Path,
) -> None:
    from testbed.mcp_harness import http_client, running_http_server, write_token_config

    config = write_token_config(tmp_path / "tokens.toml", {"acme-token": "acme"})
    with running_http_server(data_dir, config=config) as url, anyio.fail_after(CALL_TIMEOUT_S):
        async with http_client(url, "acme-token") as direct:
            ref = (await Caller(direct, "acme", send_tenant=False).ok(
                "add_memory", session="s", agent="a", content="via a token"))["ref"]
        async with (
            Client(bridged(data_dir, MEMORY_CORE_TENANT="acme")) as bound,
            Client(bridged(data_dir)) as unbound,
        ):
            found = await Caller(bound, "acme", send_tenant=False).ok("get_contents", refs=[ref])
            assert [row["content"] for row in found["found"]] == ["via a token"]
            assert error_code(await unbound.call_tool("recall", {"query": "token"})) == "TENANT_REQUIRED"


def test_an_unwritable_data_directory_fails_with_a_coded_error(tmp_path: Path) -> None:
    from tools.bridge.locate import SharedServerError, ensure_shared_server

    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(SharedServerError):
        ensure_shared_server(blocker / "data", None)


def test_bridge_tokens_carry_their_binding_and_scope_and_reject_any_change() -> None:
    from memory_core.scopes import Scope
    from tools.server_record import read_bridge_token

    token = bridge_token("s3cret", BridgeBinding("acme", "alice", Scope.READ))
    assert read_bridge_token("s3cret", token) == BridgeBinding("acme", "alice", Scope.READ)
    unbound = bridge_token("s3cret", BridgeBinding(None, None))
    assert read_bridge_token("s3cret", unbound) == BridgeBinding(None, None, Scope.WRITE)
    assert read_bridge_token("other", token) is None
    payload, signature = token.removeprefix("mcb1.").split(".")
    # the scope is inside the signed payload: a read binding cannot be turned into an admin one
    for forged in (BridgeBinding("beta", "alice", Scope.READ), BridgeBinding("acme", "alice", Scope.ADMIN)):
        forged_payload = bridge_token("whatever", forged).removeprefix("mcb1.").split(".")[0]
        assert read_bridge_token("s3cret", f"mcb1.{forged_payload}.{signature}") is None
    assert read_bridge_token("s3cret", f"mcb1.{payload}.{'0' * len(signature)}") is None


def test_an_unstartable_shared_server_fails_with_its_own_code(tmp_path: Path) -> None:
    from memory_core.errors import ConfigError
    from tools.bridge.locate import ensure_shared_server

    bad = tmp_path / "bad.toml"
    bad.write_text("[server]\nshared_idle_s = -1\n")
    started = time.monotonic()
    with pytest.raises(ConfigError):
        ensure_shared_server(tmp_path / "data", bad)
    assert time.monotonic() - started < CALL_TIMEOUT_S
