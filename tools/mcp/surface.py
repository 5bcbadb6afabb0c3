"""What agents read in ``tools/list``: lean descriptions and schemas, shaped per connection.

``tools/list`` is sent into every agent's context, so it is kept short (≤ 2,225 cl100k tokens,
``bench.quality.token_economy.SURFACE_GOAL``) without losing what an agent needs:

- Descriptions are the tool docstrings on one line, and their ``$name`` placeholders are filled
  from the live settings (:func:`surface_values`), so a default or cap an operator changed is the
  one the agent reads. They say what the answer does not: when to call, what an argument means,
  defaults and caps; not the answer's field names, which the answer shows.
- Schemas drop pydantic's ``title`` on every property and state an optional argument as its
  own type (``{"type": "string"}``, not ``anyOf [string, null]`` with ``default: null``);
  validation is the tool's pydantic model, so ``null`` is still accepted.
- A model argument (``recall_with_context``'s context entries) is inlined, not a ``$ref`` into ``$defs``.
- A tool whose spec names another in ``same_arguments_as`` (``recall_with_context``: recall;
  ``create_handoff``: add_memory; ...) states the arguments they share without their descriptions.
- On a connection bound to a tenant (token or config) ``tenant`` is not in the schemas at
  all; on one bound to an agent neither is ``viewer`` nor the author ``agent`` of writes.
  Unbound, they are ``required`` (the server instructions explain the binding once). The
  SDK's ``ServerMiddleware`` rewrites each ``tools/list`` answer for its connection.
- A connection lists only the tools its access scope may call; on a read-scoped one every
  listed tool is marked read-only (for it, none changes anything).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from string import Template
from typing import Any

from mcp.server.context import CallNext, ServerRequestContext
from pydantic import BaseModel

from memory_core import Scope, Settings
from tools.mcp.params import GET_CONTENTS_REFS_CAP, RECALL_LIMIT_CAP, RECENT_TURNS_LIMIT_CAP
from tools.registry import allowed_names, author_tools

# What a tool with "same arguments as X" does not repeat of X's (types and bounds stay).
SHARED_KEYWORDS = frozenset({"description", "default"})
# Tools whose ``agent`` argument is the author (on the recall tools it is a filter).
AUTHOR_TOOLS = author_tools()


def surface_values(settings: Settings) -> dict[str, object]:
    """The numbers descriptions quote, from the settings the server runs with."""
    return {
        "preview_chars": settings.recall.preview_chars,
        "full_budget": f"{settings.recall.full_content_budget_chars:,}",
        "recall_default": settings.recall.default_limit,
        "recall_cap": recall_cap(settings),
        "refs_cap": GET_CONTENTS_REFS_CAP,
        "turns_cap": RECENT_TURNS_LIMIT_CAP,
        "recover_turns": settings.recover.turns,
        "recover_chars": settings.recover.turn_preview_chars,
        "summary_chars": settings.model_provider.max_summary_chars,
        "max_content": f"{settings.limits.max_content_chars:,}",
    }


def recall_cap(settings: Settings) -> int:
    """The largest recall ``limit`` an agent may ask for (``server.mcp_limit_cap``, at most 50)."""
    return min(RECALL_LIMIT_CAP, settings.server.mcp_limit_cap)


def live_defaults(settings: Settings) -> dict[str, dict[str, object]]:
    """Schema keywords that come from the settings: ``{argument: {keyword: value}}``, for the
    arguments a tool's spec lists in ``settings_defaults`` (:mod:`tools.registry`).

    The tools pass an omitted ``limit`` / ``turns`` to the service as None (its settings decide),
    and clamp ``limit`` to ``server.mcp_limit_cap``; the schema states both.
    """
    return {
        "limit": {"default": settings.recall.default_limit, "maximum": recall_cap(settings)},
        "turns": {"default": settings.recover.turns},
    }


def with_defaults(schema: Mapping[str, Any], keywords: Mapping[str, Mapping[str, object]]) -> dict[str, Any]:
    """``schema`` whose properties named in ``keywords`` carry those keywords."""
    properties = dict(schema.get("properties", {}))
    for name, extra in keywords.items():
        if name in properties:
            properties[name] = {**properties[name], **extra}
    return {**schema, "properties": properties}


def describe(fn: Callable[..., Any], values: Mapping[str, object]) -> str:
    """The tool's description: its docstring on one line (a line break costs a token, and says nothing
    a space does not), with the live values filled in."""
    return Template(" ".join((fn.__doc__ or "").split())).substitute(values)


class _Recursive(Exception):
    """A model that contains itself: its ``$defs`` stay."""


def inline_definitions(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with each local ``$ref`` replaced by its ``$defs`` entry: the tools' models are small
    and each is used once, so the indirection costs more tokens than it saves. A recursive model
    keeps its ``$defs``."""
    defs = schema.get("$defs")
    if not isinstance(defs, Mapping):
        return dict(schema)

    def resolve(node: Any, seen: frozenset[str]) -> Any:
        if isinstance(node, list):
            return [resolve(item, seen) for item in node]
        if not isinstance(node, Mapping):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[8:] in defs:
            name = ref[8:]
            if name in seen:
                raise _Recursive(name)
            rest = {k: v for k, v in node.items() if k != "$ref"}
            return {**resolve(defs[name], seen | {name}), **resolve(rest, seen)}
        return {k: resolve(v, seen) for k, v in node.items() if k != "$defs"}

    try:
        inlined: dict[str, Any] = resolve(schema, frozenset())
    except _Recursive:
        return dict(schema)
    return inlined


def lean_schema(schema: Mapping[str, Any], values: Mapping[str, object]) -> dict[str, Any]:
    """The input schema without titles or null branches, descriptions filled from ``values``."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if (key == "title" and isinstance(value, str)) or (key == "additionalProperties" and value is True):
            continue  # a title repeats the name; extra properties are JSON Schema's default
        if key == "description" and isinstance(value, str):
            out[key] = Template(value).substitute(values)
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: _lean_property(prop, values) for name, prop in value.items()}
        elif isinstance(value, Mapping):
            out[key] = lean_schema(value, values)
        elif isinstance(value, list):
            out[key] = [lean_schema(item, values) if isinstance(item, Mapping) else item for item in value]
        else:
            out[key] = value
    return out


def _lean_property(prop: Mapping[str, Any], values: Mapping[str, object]) -> dict[str, Any]:
    shaped = lean_schema(prop, values)
    branches = shaped.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [branch for branch in branches if branch != {"type": "null"}]
        if len(rest) == 1 and shaped.get("default", None) is None:
            del shaped["anyOf"]
            shaped.pop("default", None)
            shaped = {**rest[0], **shaped}
    if "items" in shaped and isinstance(shaped["items"], Mapping):
        shaped["items"] = lean_schema(shaped["items"], values)
    return shaped


def share_descriptions(tool: dict[str, Any], like: Mapping[str, Any]) -> dict[str, Any]:
    """``tool``'s schema without the property descriptions and defaults it shares with ``like``'s (its
    description says "same arguments as ..."): the agent read them once already."""
    theirs = like.get("properties", {})
    properties = {
        name: {k: v for k, v in prop.items() if k not in SHARED_KEYWORDS} if theirs.get(name) == prop else prop
        for name, prop in tool.get("properties", {}).items()
    }
    return {**tool, "properties": properties}


def hidden_arguments(tool: str, *, tenant_bound: bool, agent_bound: bool) -> frozenset[str]:
    """The arguments a bound connection never needs to name on ``tool``."""
    hidden = {"tenant"} if tenant_bound else set()
    if agent_bound:
        hidden.add("viewer")
        if tool in AUTHOR_TOOLS:
            hidden.add("agent")
    return frozenset(hidden)


def required_arguments(tool: str, *, tenant_bound: bool, agent_bound: bool) -> frozenset[str]:
    """The identity arguments an unbound connection must name on ``tool`` (the call fails without)."""
    required = set() if tenant_bound else {"tenant"}
    if not agent_bound and tool in AUTHOR_TOOLS:
        required.add("agent")
    return frozenset(required)


def for_connection(tool: str, schema: Mapping[str, Any], *, tenant_bound: bool, agent_bound: bool) -> dict[str, Any]:
    """``schema`` as this connection sees it: bound arguments gone, unbound identity required."""
    hidden = hidden_arguments(tool, tenant_bound=tenant_bound, agent_bound=agent_bound)
    properties = {k: v for k, v in schema.get("properties", {}).items() if k not in hidden}
    needed = required_arguments(tool, tenant_bound=tenant_bound, agent_bound=agent_bound)
    required = [name for name in schema.get("required", []) if name not in hidden]
    required += [name for name in properties if name in needed and name not in required]
    out = {**schema, "properties": properties}
    if required:
        out["required"] = required
    return out


# On a read-scoped connection no listed tool can change anything (recover_context stores no summary there).
READ_ONLY_ANNOTATIONS = {"readOnlyHint": True, "openWorldHint": False}


async def shape_tool_list(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """``ServerMiddleware``: a ``tools/list`` answer shaped for this connection's binding and scope.

    The binding is read where the tools read it (``TenantScope``: the request's bearer token,
    else the server's configuration), so the listed schemas match what a call may name, and only
    the tools the connection's scope allows are listed (``tools.registry.allowed_names``).
    """
    result = await call_next(ctx)
    if ctx.method != "tools/list" or result is None:
        return result
    if isinstance(result, BaseModel):
        result = result.model_dump(by_alias=True, exclude_none=True, mode="json")
    listed: dict[str, Any] = result
    scope = ctx.lifespan_context.scope
    tenant_bound, agent_bound = scope.bound() is not None, scope.bound_agent() is not None
    access = scope.access()
    allowed = allowed_names(access)
    tools = [
        {**tool, "inputSchema": for_connection(tool["name"], tool["inputSchema"], tenant_bound=tenant_bound,
                                               agent_bound=agent_bound)}
        for tool in listed.get("tools", []) if tool["name"] in allowed
    ]
    if access is Scope.READ:
        tools = [{**tool, "annotations": READ_ONLY_ANNOTATIONS} for tool in tools]
    return {**listed, "tools": tools}
