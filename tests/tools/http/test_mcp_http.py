"""The MCP server over streamable HTTP (127.0.0.1, a free port), with token-bound tenants.

The server runs as a subprocess; agents connect with the SDK's real client, each with a
bearer token that binds its tenant, so the tool contract runs without naming tenants.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from testbed.mcp_harness import (
    ROOT,
    SERVER_COMMAND,
    Caller,
    error_code,
    http_client,
    running_http_server,
    server_env,
    write_token_config,
)
from tests.support.mcp_contract import ToolContract
from tools.auth import hash_token
from tools.cli.common import EXIT_CONFIG, EXIT_STORE

TOKENS = {"token-for-acme": "acme", "token-for-beta": "beta"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("mcp-http")
    with running_http_server(root / "data", config=write_token_config(root / "tokens.toml", TOKENS)) as url:
        yield url


@pytest.fixture(scope="module")
async def acme_client(server_url: str) -> AsyncIterator[Client]:
    async with http_client(server_url, "token-for-acme") as client:
        yield client


@pytest.fixture(scope="module")
async def beta_client(server_url: str) -> AsyncIterator[Client]:
    async with http_client(server_url, "token-for-beta") as client:
        yield client


@pytest.fixture(scope="module")
def acme(acme_client: Client) -> Caller:
    return Caller(acme_client, "acme", send_tenant=False)


@pytest.fixture(scope="module")
def beta(beta_client: Client) -> Caller:
    return Caller(beta_client, "beta", send_tenant=False)


class TestToolsOverStreamableHttp(ToolContract):
    """Every tool behaviour of the contract, over HTTP, the tenant bound by each agent's token."""


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic eA=="}])
def test_a_request_without_a_valid_token_gets_401(server_url: str, headers: dict[str, str]) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    response = httpx.post(server_url, json=body, headers={"Accept": "application/json, text/event-stream", **headers})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.anyio
async def test_the_real_client_cannot_connect_without_a_token(server_url: str) -> None:
    with pytest.raises(ExceptionGroup) as failure:
        async with http_client(server_url, None) as client:
            await client.list_tools()
    assert failure.group_contains(MCPError)


@pytest.mark.anyio
async def test_a_token_binds_its_tenant_and_naming_another_fails_with_tenant_mismatch(acme: Caller) -> None:
    ref = (await acme.ok("add_memory", session="binding", agent="a", content="written as acme"))["ref"]
    assert (await acme.ok("get_contents", refs=[ref], tenant="acme"))["missing"] == []
    for tool, arguments in [
        ("get_contents", {"refs": [ref], "tenant": "beta"}),
        ("add_memory", {"session": "binding", "agent": "a", "content": "sneaky", "tenant": "beta"}),
        ("recall", {"query": "acme", "tenant": "beta"}),
    ]:
        assert error_code(await acme.client.call_tool(tool, arguments)) == "TENANT_MISMATCH"


@pytest.mark.anyio
async def test_tenants_bound_by_different_tokens_never_see_each_other(acme: Caller, beta: Caller) -> None:
    secret = "beta's launch code is 4417 for the isolation test"
    ref = (await beta.ok("add_memory", session="isolation", agent="b", content=secret))["ref"]
    recalled = await acme.ok("recall", query="launch code isolation test")
    assert all("4417" not in message["content"] for message in recalled["messages"])
    assert (await acme.ok("get_contents", refs=[ref]))["missing"] == [ref]
    assert error_code(await acme.call("check_memory", ref=ref)) == "NOT_FOUND"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_loopback_server_without_tokens_requires_a_tenant_on_every_call(tmp_path: Path) -> None:
    with running_http_server(tmp_path / "data") as url:
        async with http_client(url, None) as client:
            assert error_code(await client.call_tool("recall", {"query": "x"})) == "TENANT_REQUIRED"
            ok = await client.call_tool("recall", {"query": "x", "tenant": "acme"})
            assert not ok.is_error


@pytest.mark.slow
@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.10"])
def test_a_non_loopback_host_without_tokens_refuses_to_start_and_says_why(tmp_path: Path, host: str) -> None:
    run = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--http", "--host", host, "--port", "0",
         "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == EXIT_CONFIG
    assert f"Refusing to listen on {host}" in run.stderr and "no bearer tokens" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_plaintext_token_in_the_config_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "bad.toml"
    config.write_text('[server.tokens]\n"my-plain-token" = "acme"\n', encoding="utf-8")
    run = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--http", "--port", "0", "--config", str(config),
         "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == EXIT_CONFIG
    assert "sha256" in run.stderr and "Traceback" not in run.stderr


@pytest.mark.slow
def test_a_token_listed_twice_refuses_to_start_naming_the_key(tmp_path: Path) -> None:
    # issue 46: read-only in lower case, admin in upper case; the server started and granted admin
    digest = hash_token("one-token")
    config = tmp_path / "twice.toml"
    config.write_text(f'[server.tokens]\n"{digest}" = {{ tenant = "acme", scope = "read" }}\n'
                      f'"{digest.upper()}" = {{ tenant = "acme", scope = "admin" }}\n', encoding="utf-8")
    run = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--http", "--port", "0", "--config", str(config),
         "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == EXIT_CONFIG
    assert "CONFIG_INVALID" in run.stderr and "server.tokens" in run.stderr and "twice" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "data").exists()


@pytest.mark.slow
def test_a_second_exclusive_server_on_the_same_data_directory_exits_with_store_locked(tmp_path: Path) -> None:
    # a plain stdio launch joins the running server instead (tests/tools/bridge/test_shared_server.py)
    with running_http_server(tmp_path / "data"):
        run = subprocess.run(
            [sys.executable, *SERVER_COMMAND, "--exclusive", "--data-dir", str(tmp_path / "data")],
            cwd=ROOT, env=server_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    assert run.returncode == EXIT_STORE
    assert run.stderr.startswith("memory-core: STORE_LOCKED: ") and "Traceback" not in run.stderr
