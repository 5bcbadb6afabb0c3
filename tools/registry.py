"""The one registry of MCP tools: every list of tools is derived from :data:`TOOL_SPECS`.

It sits beside the MCP server (:mod:`tools.mcp`) and the stdio bridge (:mod:`tools.bridge`),
not inside either, because both read it.

A :class:`ToolSpec` says, for one tool: its name (the name of its function), the module that
defines the function, what it does to the store (:class:`Effect`, from which its MCP
annotations follow), the least access :class:`~memory_core.scopes.Scope` that may call it,
and how ``tools/list`` states its arguments. Derived from it:

- ``tools/list`` and the annotations of each tool (:mod:`tools.mcp.server`);
- the schemas of bound connections: which tools' ``agent`` is the author, which arguments
  take their defaults from the settings, which tools say "same arguments as"
  (:mod:`tools.mcp.surface`);
- the scope checks and each connection's listing (:func:`allowed_names`);
- the calls the stdio bridge resends after a reconnect: the read-only ones
  (:func:`read_only_names`, :mod:`tools.bridge.client`).

Stdlib only, and the tool functions are imported only by :meth:`ToolSpec.function`: the
bridge imports this module and must start in a fraction of a second.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from importlib import import_module
from typing import Any

from memory_core import Scope


class Effect(StrEnum):
    """What a call does to the store."""

    READ = "read"  # changes nothing
    WRITE = "write"  # adds (a memory, a version, a summary, a lock state); removes nothing
    DESTRUCTIVE = "destructive"  # removes data


@dataclass(frozen=True)
class ToolSpec:
    """One MCP tool. ``name`` is also its function's name, defined in ``module``."""

    name: str
    module: str
    effect: Effect
    scope: Scope  # the least scope that may call it (and see it in tools/list)
    idempotent: bool = False  # repeating the call with the same arguments changes nothing more
    authors: bool = False  # its ``agent`` argument is the author (on reads, ``agent`` is a filter)
    same_arguments_as: str | None = None  # its description says so: shared arguments go undescribed
    settings_defaults: tuple[str, ...] = ()  # arguments whose default and cap come from the settings

    def function(self) -> Callable[..., Any]:
        """The tool function (imports its module: the MCP SDK and pydantic load with it)."""
        fn: Callable[..., Any] = getattr(import_module(self.module), self.name)
        return fn

    def hints(self) -> dict[str, bool]:
        """The MCP tool annotations (``ToolAnnotations`` keywords) that follow from the effect."""
        if self.effect is Effect.READ:
            return {"read_only_hint": True, "open_world_hint": False}
        hints = {"read_only_hint": False, "destructive_hint": self.effect is Effect.DESTRUCTIVE,
                 "open_world_hint": False}
        if self.idempotent:
            hints["idempotent_hint"] = True
        return hints


_TOOLS = "tools.mcp.tools.memory"
_RECALL = "tools.mcp.tools.recall"
_SESSION = "tools.mcp.tools.sessions"
_VERSION = "tools.mcp.tools.versions"
_RELATED = "tools.mcp.tools.related"

# In the order agents see them in tools/list.
TOOL_SPECS: tuple[ToolSpec, ...] = (
    ToolSpec("add_memory", _TOOLS, Effect.WRITE, Scope.WRITE, authors=True),
    ToolSpec("recall", _RECALL, Effect.READ, Scope.READ, settings_defaults=("limit",)),
    ToolSpec("recall_with_context", _RECALL, Effect.READ, Scope.READ, same_arguments_as="recall",
             settings_defaults=("limit",)),
    ToolSpec("get_contents", _TOOLS, Effect.READ, Scope.READ),
    ToolSpec("query_recent_turns", _TOOLS, Effect.READ, Scope.READ),
    ToolSpec("check_memory", _TOOLS, Effect.READ, Scope.READ),
    ToolSpec("related", _RELATED, Effect.READ, Scope.READ),
    ToolSpec("create_handoff", _TOOLS, Effect.WRITE, Scope.WRITE, authors=True, same_arguments_as="add_memory"),
    # write: the caller's own rows; admin: any row it can read (checked by the service, per row)
    ToolSpec("delete_memory", _TOOLS, Effect.DESTRUCTIVE, Scope.WRITE, idempotent=True),
    ToolSpec("update_memory", _VERSION, Effect.WRITE, Scope.WRITE, authors=True, same_arguments_as="add_memory"),
    ToolSpec("lock_memory", _VERSION, Effect.WRITE, Scope.WRITE, same_arguments_as="delete_memory"),
    ToolSpec("unlock_memory", _VERSION, Effect.WRITE, Scope.WRITE, same_arguments_as="delete_memory"),
    # it may store a fresh summary episode; on a read-scoped connection it stores none
    ToolSpec("recover_context", _SESSION, Effect.WRITE, Scope.READ, settings_defaults=("turns",)),
    ToolSpec("summarize_session", _SESSION, Effect.WRITE, Scope.WRITE),
)

SPECS_BY_NAME: dict[str, ToolSpec] = {spec.name: spec for spec in TOOL_SPECS}


def read_only_names() -> frozenset[str]:
    """The tools that change nothing: a call of one may be sent twice without harm."""
    return frozenset(spec.name for spec in TOOL_SPECS if spec.effect is Effect.READ)


def allowed_names(scope: Scope) -> frozenset[str]:
    """The tools a connection of ``scope`` may call (and sees in ``tools/list``)."""
    return frozenset(spec.name for spec in TOOL_SPECS if scope.allows(spec.scope))


def author_tools() -> frozenset[str]:
    """The tools whose ``agent`` argument is the author (hidden on agent-bound connections)."""
    return frozenset(spec.name for spec in TOOL_SPECS if spec.authors)
