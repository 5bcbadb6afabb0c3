"""Tool arguments are checked as the JSON types their schemas state, over the real MCP client.

pydantic's lax mode used to coerce: ``limit: "10"`` became 10, ``deep: "yes"`` True and
``salience: true`` 1.0 (stored). Every integer, boolean and number argument of every tool now
refuses another JSON type with INVALID_INPUT naming the argument, and nothing is written.
Lists and objects sent as JSON strings (``refs: '["mem:1"]'``, ``metadata: '{...}'``) were decoded
by the SDK; they are refused the same way (issue 37, point 15), over stdio and HTTP.
An argument a tool does not take (``visiblity: "agent"``, a typo that stored a private row shared)
is refused the same way, naming it (issue 46, point 5), never ignored.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_core.settings import load_settings
from testbed.mcp_harness import Caller, error_code, http_client, running_http_server, stdio_params
from testbed.mcp_in_process import served
from tests.support.mcp_contract import VALID_CALLS, refuses_unknown_arguments
from tools.registry import TOOL_SPECS

WRONG_VALUES: dict[str, list[Any]] = {
    "integer": ["10", True, 10.5, "1e1"],
    "boolean": ["yes", "true", 1, 0, "false"],
    "number": [True, "NaN", "0.5", "Infinity"],
}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with Client(stdio_params(tmp_path_factory.mktemp("strict"))) as c:
        yield c


@pytest.fixture(scope="module")
def acme(client: Client) -> Caller:
    return Caller(client, "acme")


def _scalar_types(schema: dict[str, Any]) -> set[str]:
    types = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf", []):
        types |= _scalar_types(option)
    return types & set(WRONG_VALUES)


@pytest.mark.slow
@pytest.mark.anyio
async def test_every_integer_boolean_and_number_argument_refuses_other_json_types(acme: Caller) -> None:
    tools = {tool.name: tool for tool in (await acme.client.list_tools()).tools}
    assert set(VALID_CALLS) <= set(tools)
    probed = 0
    for name, tool in tools.items():
        for argument, schema in tool.input_schema["properties"].items():
            for kind in _scalar_types(schema):
                for wrong in WRONG_VALUES[kind]:
                    result = await acme.call(name, **{**VALID_CALLS[name], argument: wrong})
                    assert error_code(result) == "INVALID_INPUT", (name, argument, wrong)
                    assert f"'{argument}'" in result.content[0].text  # type: ignore[union-attr]
                    probed += 1
    assert probed >= 30  # limit, deep, full_content, salience, turns ... all probed


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_coercions_the_attack_found_are_invalid_input_with_a_clear_sentence(acme: Caller) -> None:
    add = VALID_CALLS["add_memory"]
    cases = [
        ("recall", {"query": "x", "limit": "10"}, "'limit' input should be a valid integer (got a string)"),
        ("recall", {"query": "x", "limit": True}, "'limit' input should be a valid integer (got a boolean)"),
        ("recall", {"query": "x", "deep": "yes"}, "'deep' input should be a valid boolean (got a string)"),
        ("recall", {"query": "x", "full_content": 1},
         "'full_content' input should be a valid boolean (got an integer)"),
        ("add_memory", {**add, "salience": True}, "'salience' input should be a valid number (got a boolean)"),
        ("add_memory", {**add, "salience": "NaN"}, "'salience' input should be a valid number (got a string)"),
    ]
    for tool, arguments, sentence in cases:
        result = await acme.call(tool, **arguments)
        assert error_code(result) == "INVALID_INPUT"
        assert sentence in result.content[0].text, result.content  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_refused_salience_writes_nothing(acme: Caller) -> None:
    content = "salience typed as a boolean must not be stored"
    result = await acme.call("add_memory", session="strict-nothing", agent="a", content=content, salience=True)
    assert error_code(result) == "INVALID_INPUT"
    page = await acme.ok("query_recent_turns", session="strict-nothing")
    assert page["turns"] == []


@pytest.mark.anyio
async def test_right_types_still_work_including_a_whole_number_salience(acme: Caller) -> None:
    added = await acme.ok("add_memory", session="strict-ok", agent="a", content="typed right", salience=1)
    recalled = await acme.ok("recall", query="typed right", session="strict-ok", limit=5, deep=True,
                             full_content=False)  # fmt: skip
    assert [m["ref"] for m in recalled["messages"]] == [added["ref"]]
    row = (await acme.ok("get_contents", refs=[added["ref"]]))["found"][0]
    assert row["salience"] == 1.0
    listed = await acme.ok("recall", query="typed right", exclude_contents=["nothing held"])
    assert added["ref"] in [m["ref"] for m in listed["messages"]]


# A valid list or object for each container argument, sent once as itself and once as a JSON string.
CONTAINER_VALUES: dict[str, Any] = {
    "refs": ["mem:1"], "entities": [{"name": "Orion"}], "relations": [], "metadata": {"k": "v"},
    "source": {"id": "discord:1"}, "exclude_contents": ["held"], "context": [{"role": "user", "content": "hi"}],
}


def _container_types(schema: dict[str, Any]) -> set[str]:
    types = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for option in schema.get("anyOf", []):
        types |= _container_types(option)
    return types & {"array", "object"}


async def refuses_json_strings_for_containers(caller: Caller) -> set[str]:
    """Every list or object argument of every tool, sent as a JSON string: INVALID_INPUT naming it."""
    tools = {tool.name: tool for tool in (await caller.client.list_tools()).tools}
    probed: set[str] = set()
    for name, tool in tools.items():
        for argument, schema in tool.input_schema["properties"].items():
            if not _container_types(schema):
                continue
            as_string = json.dumps(CONTAINER_VALUES[argument])
            result = await caller.call(name, **{**VALID_CALLS[name], argument: as_string})
            assert error_code(result) == "INVALID_INPUT", (name, argument, result.content)
            text = result.content[0].text  # type: ignore[union-attr]
            assert f"'{argument}'" in text and "(got a string)" in text, text
            probed.add(argument)
    return probed


@pytest.mark.anyio
async def test_list_and_object_arguments_sent_as_json_strings_are_refused_over_stdio(acme: Caller) -> None:
    probed = await refuses_json_strings_for_containers(acme)
    assert {"refs", "entities", "metadata", "source", "exclude_contents", "context"} <= probed


@pytest.mark.anyio
async def test_a_json_string_metadata_writes_nothing(acme: Caller) -> None:
    result = await acme.call("add_memory", session="strict-json", agent="a", content="metadata as a string",
                             metadata='{"k": "v"}')
    assert error_code(result) == "INVALID_INPUT"
    assert (await acme.ok("query_recent_turns", session="strict-json"))["turns"] == []


@pytest.mark.slow
@pytest.mark.anyio
async def test_list_and_object_arguments_sent_as_json_strings_are_refused_over_http(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with running_http_server(tmp_path_factory.mktemp("strict-http")) as url:
        async with http_client(url, None) as client:
            probed = await refuses_json_strings_for_containers(Caller(client, "acme"))
    assert {"refs", "entities", "metadata", "source", "exclude_contents", "context"} <= probed




def test_the_probes_cover_every_tool_of_the_registry() -> None:
    assert set(VALID_CALLS) == {spec.name for spec in TOOL_SPECS}


@pytest.mark.anyio
async def test_an_unknown_argument_is_refused_naming_it_on_every_tool_in_process(tmp_path: Path) -> None:
    # the contract runs the same probe over stdio, the bridge and HTTP (tests/support/mcp_contract.py)
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    async with Client(served(settings, str(tmp_path))) as client:
        caller = Caller(client, "acme")
        assert await refuses_unknown_arguments(caller) == set(VALID_CALLS)
        typo = await caller.call("add_memory", session="s", agent="alice", content="private", visiblity="agent")
        assert typo.content[0].text == (  # type: ignore[union-attr]
            "INVALID_INPUT: Argument 'visiblity' is not an argument of this tool (did you mean 'visibility'?).")
        several = await caller.call("recall", query="x", tenant_id="acme", lmit=3)
        assert error_code(several) == "INVALID_INPUT"
        assert several.content[0].text == (  # type: ignore[union-attr]
            "INVALID_INPUT: Argument 'tenant_id' is not an argument of this tool (did you mean 'tenant'?) "
            "(1 more problem(s)).")
        assert (await caller.ok("query_recent_turns", session="s", viewer="alice"))["turns"] == []
