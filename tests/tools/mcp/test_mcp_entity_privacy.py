"""Private entity names over the real MCP client (stdio subprocess), on both graph backends
(issue 37, point 10): when bob declares ann's private name (in another case and spacing) he gets
an entity of his own — his spelling, no kind, another ref — and neither ``recall`` nor
``related`` resolves her private alias for him."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from testbed.mcp_harness import Caller, error_code, stdio_params
from tests.support.backends import graph_backends

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _postgres_env(request: pytest.FixtureRequest) -> dict[str, str]:
    from testbed.postgres import fresh_database

    host, port = request.getfixturevalue("chroma_server")
    return {"MEMORY_CORE_STORAGE_GRAPH": "postgres",
            "MEMORY_CORE_STORAGE_POSTGRES_DSN": fresh_database(request.getfixturevalue("postgres_dsn")),
            "MEMORY_CORE_STORAGE_CHROMA": "http", "MEMORY_CORE_STORAGE_CHROMA_HOST": host,
            "MEMORY_CORE_STORAGE_CHROMA_PORT": str(port),
            "MEMORY_CORE_STORAGE_COLLECTION_PREFIX": "p" + secrets.token_hex(4)}


@pytest.fixture(params=graph_backends())
async def acme(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Caller]:
    env = _postgres_env(request) if request.param == "postgres" else {}
    async with Client(stdio_params(tmp_path / "data", **env)) as client:
        yield Caller(client, "acme")


def _entities(check: dict[str, Any]) -> list[dict[str, Any]]:
    entities: list[dict[str, Any]] = check["neighbours"].get("entities", [])
    return entities


@pytest.mark.anyio
async def test_another_agent_declaring_a_private_name_over_mcp_gets_its_own_entity(acme: Caller) -> None:
    private = {"name": "Project Nightjar", "kind": "project", "aliases": ["Operation Quiet Owl"]}
    hers = await acme.ok("add_memory", session="s1", agent="ann", content="kickoff for the migration",
                         visibility="agent", entities=[private])
    his = await acme.ok("add_memory", session="s1", agent="bob", content="status update for the week",
                        entities=[{"name": "  project   NIGHTJAR "}])
    (her_entity,) = _entities(await acme.ok("check_memory", ref=hers["ref"], viewer="ann"))
    (his_entity,) = _entities(await acme.ok("check_memory", ref=his["ref"], viewer="bob"))
    assert (her_entity["name"], her_entity["kind"]) == ("Project Nightjar", "project")
    assert his_entity["name"] == "project NIGHTJAR" and his_entity.get("kind") is None
    assert his_entity["aliases"] == ["project NIGHTJAR"] and his_entity["ref"] != her_entity["ref"]
    for entity in ("Operation Quiet Owl", her_entity["ref"]):
        assert error_code(await acme.call("related", entity=entity, viewer="bob")) == "NOT_FOUND"
    recalled = await acme.ok("recall", query="Operation Quiet Owl", viewer="bob")
    assert all("entity" not in (m.get("match_reason") or {}) for m in recalled["messages"]), recalled
    mine = await acme.ok("recall", query="Operation Quiet Owl", viewer="ann")
    assert mine["messages"][0]["ref"] == hers["ref"]
    assert mine["messages"][0]["match_reason"]["entities"] == ["Project Nightjar"]
