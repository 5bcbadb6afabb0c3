"""The MCP server over stdio, as a subprocess driven by the SDK's real client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from testbed.mcp_harness import Caller, error_code, stdio_params
from tests.support.mcp_contract import ToolContract


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def stdio_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with Client(stdio_params(tmp_path_factory.mktemp("mcp-stdio"))) as client:
        yield client


@pytest.fixture(scope="module")
def acme(stdio_client: Client) -> Caller:
    return Caller(stdio_client, "acme")


@pytest.fixture(scope="module")
def beta(stdio_client: Client) -> Caller:
    return Caller(stdio_client, "beta")


class TestToolsOverStdio(ToolContract):
    """Every tool behaviour of the contract, over stdio (the tenant is passed on each call)."""


@pytest.mark.anyio
async def test_without_a_binding_every_call_must_name_a_valid_tenant(stdio_client: Client) -> None:
    assert error_code(await stdio_client.call_tool("recall", {"query": "anything"})) == "TENANT_REQUIRED"
    assert error_code(await stdio_client.call_tool("recall", {"query": "x", "tenant": ""})) == "TENANT_REQUIRED"
    malformed = await stdio_client.call_tool("recall", {"query": "x", "tenant": "bad tenant!"})
    assert error_code(malformed) == "INVALID_TENANT"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_configured_tenant_binds_every_stdio_call(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path / "data", MEMORY_CORE_TENANT="acme")) as client:
        bound = Caller(client, "acme", send_tenant=False)
        ref = (await bound.ok("add_memory", session="s", agent="a", content="bound by config"))["ref"]
        assert [r["ref"] for r in (await bound.ok("get_contents", refs=[ref]))["found"]] == [ref]
        assert (await bound.ok("get_contents", refs=[ref], tenant="acme"))["missing"] == []
        mismatch = await client.call_tool("get_contents", {"tenant": "beta", "refs": [ref]})
        assert error_code(mismatch) == "TENANT_MISMATCH"
