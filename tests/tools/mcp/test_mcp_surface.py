"""What agents read in tools/list: small, documented from the live settings, shaped per binding.

Drives the real server through the SDK's in-process client (the stdio and HTTP contract tests
check the same shaping over their transports, the HTTP one with token-bound tenants).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp_types import Tool

from bench.quality.token_economy import SURFACE_GOAL, tool_list_tokens
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from testbed.mcp_in_process import served
from tools.mcp.surface import inline_definitions

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings_with(**sections: Mapping[str, object]) -> Settings:
    return load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, **sections})


async def listed(settings: Settings, tmp_path: Path) -> dict[str, Tool]:
    async with Client(served(settings, str(tmp_path))) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


def walk(schema: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(schema, Mapping):
        yield schema
        for value in schema.values():
            yield from walk(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from walk(value)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[Client]:
    async with Client(served(settings_with(), str(tmp_path))) as connected:
        yield connected


async def test_the_tool_list_fits_its_token_budget_bound_or_not() -> None:
    unbound = await tool_list_tokens(settings_with())
    bound = await tool_list_tokens(settings_with(server={"tenant": "acme", "agent": "alice"}))
    assert unbound <= SURFACE_GOAL
    assert bound < unbound  # the bound connection is not even told about tenant, viewer, author


async def test_descriptions_carry_no_docstring_indentation_and_no_unfilled_placeholder(tmp_path: Path) -> None:
    for tool in (await listed(settings_with(), tmp_path)).values():
        texts = [tool.description or ""] + [n["description"] for n in walk(tool.input_schema) if "description" in n]
        for text in texts:
            assert "$" not in text, (tool.name, text)
            assert not any(line.startswith(" ") for line in text.splitlines()), (tool.name, text)


async def test_schemas_carry_no_titles_and_no_null_branches(tmp_path: Path) -> None:
    for tool in (await listed(settings_with(), tmp_path)).values():
        for node in walk(tool.input_schema["properties"]):
            assert not isinstance(node.get("title"), str), tool.name
            assert {"type": "null"} not in node.get("anyOf", []), tool.name
            assert node.get("additionalProperties") is not True, tool.name  # JSON Schema's default


async def test_defaults_and_caps_in_the_descriptions_are_the_live_settings(tmp_path: Path) -> None:
    settings = settings_with(
        recall={"preview_chars": 321, "default_limit": 7, "full_content_budget_chars": 90_000},
        server={"mcp_limit_cap": 30},
        recover={"turn_preview_chars": 150, "turns": 12},
        model_provider={"max_summary_chars": 240},
    )
    tools = await listed(settings, tmp_path)
    recall = tools["recall"]
    limit = recall.input_schema["properties"]["limit"]
    assert (limit["maximum"], limit["default"]) == (30, 7)
    assert "default 7, at most 30" in limit["description"]
    assert "at most 321 chars" in (recall.description or "")
    assert "90,000" in recall.input_schema["properties"]["full_content"]["description"]
    assert "150-char previews" in (tools["recover_context"].description or "")
    assert tools["recover_context"].input_schema["properties"]["turns"]["default"] == 12
    assert "at most 240 chars" in (tools["summarize_session"].description or "")


async def test_an_unbound_connection_must_name_its_tenant_and_author(tmp_path: Path) -> None:
    tools = await listed(settings_with(), tmp_path)
    assert all("tenant" in tool.input_schema["required"] for tool in tools.values())
    assert "agent" in tools["add_memory"].input_schema["required"]
    assert "agent" not in tools["recall"].input_schema.get("required", [])  # there it is a filter


async def test_a_bound_connection_is_not_offered_the_arguments_its_binding_fills(tmp_path: Path) -> None:
    tools = await listed(settings_with(server={"tenant": "acme", "agent": "alice"}), tmp_path)
    for tool in tools.values():
        assert "tenant" not in tool.input_schema["properties"], tool.name
        assert "viewer" not in tool.input_schema["properties"], tool.name
        assert "tenant" not in tool.input_schema.get("required", [])
    assert "agent" not in tools["add_memory"].input_schema["properties"]
    assert "agent" in tools["recall"].input_schema["properties"]  # the filter stays


async def test_a_bound_connection_may_still_name_its_own_tenant(tmp_path: Path) -> None:
    async with Client(served(settings_with(server={"tenant": "acme"}), str(tmp_path))) as client:
        ok = await client.call_tool("add_memory", {"tenant": "acme", "session": "s", "agent": "a", "content": "x"})
        assert not ok.is_error
        other = await client.call_tool("add_memory", {"tenant": "beta", "session": "s", "agent": "a", "content": "x"})
        assert other.is_error and other.content[0].text.startswith("TENANT_MISMATCH")  # type: ignore[union-attr]


async def test_server_info_carries_the_package_version(client: Client) -> None:
    assert client.server_info is not None
    assert client.server_info.version == importlib.metadata.version("memory-core")


async def test_recover_context_is_not_announced_as_read_only(client: Client) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    hints = tools["recover_context"].annotations
    assert hints is not None and hints.read_only_hint is False and hints.destructive_hint is False
    assert tools["recall"].annotations is not None and tools["recall"].annotations.read_only_hint is True


async def test_the_instructions_explain_the_tenant_binding_once(tmp_path: Path) -> None:
    instructions = served(settings_with(), tmp_path).instructions
    assert instructions is not None and "TENANT_MISMATCH" in instructions and "TENANT_REQUIRED" in instructions


async def test_model_arguments_are_inlined_instead_of_referenced_through_defs(tmp_path: Path) -> None:
    tools = await listed(settings_with(), tmp_path)
    for tool in tools.values():
        assert "$defs" not in tool.input_schema and all("$ref" not in node for node in walk(tool.input_schema))
    entry = tools["recall_with_context"].input_schema["properties"]["context"]["items"]
    assert entry["type"] == "object" and entry["required"] == ["role", "content"]


def test_a_recursive_model_keeps_its_definitions() -> None:
    tree = {"$defs": {"Node": {"type": "object", "properties": {"kids": {"items": {"$ref": "#/$defs/Node"}}}}},
            "properties": {"root": {"$ref": "#/$defs/Node"}}}
    assert inline_definitions(tree) == tree


async def test_recall_with_context_lists_recalls_arguments_once_described(tmp_path: Path) -> None:
    tools = await listed(settings_with(), tmp_path)
    recall, steered = (tools[name].input_schema["properties"] for name in ("recall", "recall_with_context"))
    for name, prop in recall.items():
        assert name in steered
        assert "description" not in steered[name] and "default" not in steered[name], name
        assert steered[name].get("maximum") == prop.get("maximum") and steered[name]["type"] == prop["type"]
