"""add_memory's entities and relations over the real MCP stdio transport (the SDK's client)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from memory_core import MemoryCore
from memory_core.settings import load_settings
from testbed.mcp_harness import Caller, error_code, stdio_params

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_add_memory_over_mcp_declares_entities_and_refuses_malformed_ones(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Client(stdio_params(data)) as client:
        acme = Caller(client, "acme")
        added = await acme.ok("add_memory", session="s1", agent="ann", content="the gateway timed out",
                              entities=[{"name": "Payments API", "kind": "service", "aliases": ["payments-api"]},
                                        {"name": "Alice"}],
                              relations=[{"from": "alice", "to": "PAYMENTS-API", "label": "owns"}])
        assert added["created"] is True
        checked = await acme.ok("check_memory", ref=added["ref"])
        assert sorted(e["name"] for e in checked["neighbours"]["entities"]) == ["Alice", "Payments API"]
        bad = await acme.call("add_memory", session="s1", agent="ann", content="x",
                              entities=[{"name": "Alice"}], relations=[{"from": "Alice", "to": "Bob", "label": "k"}])
        assert error_code(bad) == "INVALID_INPUT" and "relations[0].to" in bad.content[0].text  # type: ignore[union-attr]
        too_many = await acme.call("add_memory", session="s1", agent="ann", content="x",
                                   entities=[{"name": f"e{i}"} for i in range(33)])
        assert too_many.is_error
    with MemoryCore.open(data, settings=load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})) as core:
        assert core._graph.count("acme") == 1
        listed = {e.name: (e.kind, e.aliases, e.mentions) for e in core.list_entities("acme")}
        assert listed == {"Payments API": ("service", ("Payments API", "payments-api"), 1),
                          "Alice": (None, ("Alice",), 1)}
        assert [r.label for r in core._graph.all_relations("acme")] == ["owns"]
