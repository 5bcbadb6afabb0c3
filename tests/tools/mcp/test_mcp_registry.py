"""The one tool registry: tools/list, the annotations, the bound schemas and the bridge's retry set
all follow from ``tools.registry.TOOL_SPECS``, so a tool added there is complete everywhere."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from mcp import Client
from mcp_types import Tool

from memory_core.scopes import Scope
from memory_core.settings import load_settings
from testbed.mcp_in_process import served
from tools.bridge import client as bridge
from tools.mcp import surface as mcp_surface
from tools.registry import SPECS_BY_NAME, TOOL_SPECS, Effect, allowed_names, read_only_names

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def listed(tmp_path: Path) -> list[Tool]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "server": {"scope": "admin"}})
    async with Client(served(settings, str(tmp_path))) as client:
        return list((await client.list_tools()).tools)


async def test_every_registered_tool_is_listed_in_order_with_the_annotations_its_spec_implies(tmp_path: Path) -> None:
    tools = await listed(tmp_path)
    assert [tool.name for tool in tools] == [spec.name for spec in TOOL_SPECS]
    for tool in tools:
        spec = SPECS_BY_NAME[tool.name]
        hints = tool.annotations
        assert hints is not None, tool.name
        assert hints.read_only_hint is (spec.effect is Effect.READ), tool.name
        if spec.effect is not Effect.READ:
            assert hints.destructive_hint is (spec.effect is Effect.DESTRUCTIVE), tool.name
            assert bool(hints.idempotent_hint) is spec.idempotent, tool.name
        assert hints.open_world_hint is False, tool.name  # nothing reaches beyond the store


def test_each_spec_names_its_own_function_and_a_consistent_scope() -> None:
    for spec in TOOL_SPECS:
        fn = spec.function()
        assert fn.__name__ == spec.name and inspect.iscoroutinefunction(fn), spec.name
        if spec.effect is Effect.READ:
            assert spec.scope is Scope.READ, spec.name  # a read the read scope may not call is a forgotten scope
        if spec.effect is Effect.DESTRUCTIVE:
            assert spec.scope is not Scope.READ, spec.name
        params = inspect.signature(fn).parameters
        assert all(arg in params for arg in spec.settings_defaults), spec.name
        assert ("agent" in params) or not spec.authors, spec.name
        assert spec.same_arguments_as is None or spec.same_arguments_as in SPECS_BY_NAME, spec.name


def test_the_bridge_resends_exactly_the_read_only_tools() -> None:
    read_only = {spec.name for spec in TOOL_SPECS if spec.hints()["read_only_hint"]}
    assert bridge.READ_ONLY_TOOLS == read_only == read_only_names()
    assert read_only  # recall at least


def test_author_tools_and_scope_listings_come_from_the_specs() -> None:
    assert {spec.name for spec in TOOL_SPECS if spec.authors} == mcp_surface.AUTHOR_TOOLS
    assert allowed_names(Scope.ADMIN) == set(SPECS_BY_NAME)
    assert allowed_names(Scope.READ) == {spec.name for spec in TOOL_SPECS if spec.scope is Scope.READ}
    assert allowed_names(Scope.READ) < allowed_names(Scope.WRITE) <= allowed_names(Scope.ADMIN)
