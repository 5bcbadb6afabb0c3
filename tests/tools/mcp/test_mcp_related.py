"""The ``related`` tool over the real MCP client and a real ``memory-core serve`` subprocess (stdio)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from mcp import Client

from bench.quality.token_economy import cl100k
from testbed.mcp_harness import Caller, error_code, stdio_params

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def stdio_client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with Client(stdio_params(tmp_path_factory.mktemp("mcp-related"))) as client:
        yield client


@pytest.fixture(scope="module")
async def written(stdio_client: Client) -> dict[str, str]:
    acme = Caller(stdio_client, "acme")
    first = await acme.ok("add_memory", session="s1", agent="ann", type="note",
                          content="The ledger-svc outage was caused by Kestrel Proxy. " + "details " * 200)
    second = await acme.ok("add_memory", session="s2", agent="bob", type="note",
                           content="Kestrel Proxy is owned by @dana.")
    secret = await acme.ok("add_memory", session="s3", agent="eve", type="note", visibility="agent",
                           content="Kestrel Proxy admin password rotates at midnight.")
    return {"first": first["ref"], "second": second["ref"], "secret": secret["ref"]}


@pytest.mark.slow
async def test_related_lists_memories_as_previews_and_entities_with_their_paths(
        stdio_client: Client, written: dict[str, str]) -> None:
    out = await Caller(stdio_client, "acme").ok("related", entity="kestrel proxy", depth=2, limit=20)
    assert out["start"]["name"] == "Kestrel Proxy" and out["start"]["ref"].startswith("ent:")
    items = {i["ref"]: i for i in out["items"]}
    first = items[written["first"]]
    assert first["kind"] == "memory" and first["depth"] == 1 and first["via"] == "MENTIONED_BY"
    assert first["content_truncated"] is True and len(first["content"]) < first["content_len"]  # a preview
    dana = next(i for i in out["items"] if i.get("name") == "@dana")
    assert dana["kind"] == "entity" and dana["depth"] == 2 and dana["path"] == [{"ref": written["second"],
                                                                                  "via": "MENTIONED_BY"}]
    assert written["secret"] not in items  # eve's private memory, and the caller is not eve
    scores = [i["score"] for i in out["items"]]
    assert scores == sorted(scores, reverse=True)


@pytest.mark.slow
async def test_related_from_a_memory_ref_reaches_its_entities(stdio_client: Client, written: dict[str, str]) -> None:
    out = await Caller(stdio_client, "acme").ok("related", entity=written["second"], depth=1)
    assert {i.get("name") for i in out["items"]} >= {"Kestrel Proxy", "@dana"}


async def test_related_arguments_are_strict_and_errors_are_coded(stdio_client: Client, written: dict[str, str]) -> None:
    acme = Caller(stdio_client, "acme")
    assert error_code(await acme.call("related", entity="Kestrel Proxy", depth=4)) == "INVALID_INPUT"
    assert error_code(await acme.call("related", entity="Kestrel Proxy", depth="2")) == "INVALID_INPUT"
    assert error_code(await acme.call("related", entity="Kestrel Proxy", limit=51)) == "INVALID_INPUT"
    assert error_code(await acme.call("related", entity="Nobody At All")) == "NOT_FOUND"
    assert error_code(await Caller(stdio_client, "other").call("related", entity="Kestrel Proxy")) == "NOT_FOUND"
    assert error_code(await stdio_client.call_tool("related", {"entity": "Kestrel Proxy"})) == "TENANT_REQUIRED"


async def test_the_related_description_stays_short(stdio_client: Client) -> None:
    tool = next(t for t in (await stdio_client.list_tools()).tools if t.name == "related")
    assert len(cl100k().encode(tool.description or "")) <= 90
    assert set(tool.input_schema["properties"]) == {"entity", "tenant", "depth", "limit", "viewer"}


async def test_recall_over_mcp_names_the_entity_branch_in_match_reason(stdio_client: Client,
                                                                       written: dict[str, str]) -> None:
    out = await Caller(stdio_client, "acme").ok("recall", query="why was ledger-svc down?", limit=10)
    row = next(m for m in out["messages"] if m["ref"] == written["first"])
    assert row["match_reason"]["entities"] == ["ledger-svc"] and row["match_reason"]["entity"] > 0
