"""Every boundary that adds a memory takes the fields of one type (``memory_core.write.request``): a field
added there is offered by the MCP tool and the CLI, or left out of one on purpose, here."""

from __future__ import annotations

import inspect

from memory_core.write.request import ADD_FIELD_NAMES, MEMORY_FIELD_NAMES
from tools.cli import memories
from tools.mcp.tools import memory

MCP_IDENTITY = {"ctx", "session", "content", "agent", "tenant"}
CLI_IDENTITY = {"ctx", "content", "tenant", "session", "agent", "config", "data_dir", "json_out"}
CLI_OPTION_FIELD = {"type_": "type", "source_id": "source"}  # an option named apart from its field
NOT_ON_THE_CLI = {"entities", "relations"}  # lists of objects: add_memories, the library and MCP take them


def arguments(fn: object, identity: set[str]) -> set[str]:
    return set(inspect.signature(fn).parameters) - identity  # type: ignore[arg-type]


def test_the_add_memory_tool_takes_every_add_field() -> None:
    assert arguments(memory.add_memory, MCP_IDENTITY) == ADD_FIELD_NAMES


def test_the_create_handoff_tool_takes_only_fields_of_a_memory() -> None:
    offered = arguments(memory.create_handoff, MCP_IDENTITY)
    assert offered and offered <= MEMORY_FIELD_NAMES
    add = inspect.signature(memory.add_memory).parameters
    for name, param in inspect.signature(memory.create_handoff).parameters.items():
        if name in offered:  # the same argument type (schema, description) as add_memory's
            assert param.annotation == add[name].annotation, name


def test_the_cli_add_command_offers_every_add_field_but_the_lists_of_objects() -> None:
    options = {CLI_OPTION_FIELD.get(name, name) for name in arguments(memories.add, CLI_IDENTITY)}
    assert options == ADD_FIELD_NAMES - NOT_ON_THE_CLI
