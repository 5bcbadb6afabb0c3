"""The MCP server: its tools from the registry, its lifespan, and how its errors map.

:func:`build_server` makes the server from the settings, the stores it serves (opened by the
process that runs it, :mod:`tools.serve`) and, over HTTP, the verifier of its bearer tokens; the
lifespan hands a ``ServerState`` to every tool through the SDK's typed context and closes the
stores at shutdown. Nothing here opens a store, binds a socket or knows a transport's process.
Errors map once, here and in ``tools.mcp.context``:

- ``MemoryCoreError``            -> tool error ``<CODE>: <sentence>`` (its own code)
- arguments failing the schema, or one the tool does not take -> tool error ``INVALID_INPUT`` naming it
  (``tools.mcp.arguments``)
- unknown tool name              -> tool error ``UNKNOWN_TOOL``
- a tool the connection's scope does not allow -> tool error ``SCOPE_DENIED`` (nothing runs)
- anything else (a bug)          -> tool error ``INTERNAL_ERROR``; traceback in the server log only
- stdio line that is not JSON-RPC -> JSON-RPC error ``-32700`` / ``-32600`` (``tools.mcp.stdio_replies``)
- a request holding a lone surrogate -> tools/call: tool error ``INVALID_INPUT``; others: ``-32602``,
  under the request's own id (``tools.http.unencodable``, on every transport)
- HTTP, before any tool runs      -> 421 foreign Host, 403 foreign Origin, 413 body over
  ``server.max_request_bytes``, 503 past ``server.max_inflight_bytes`` (``tools.http.guard``, mounted
  by ``tools.serve.http``)

Run it with the CLI (one argument parser): ``memory-core serve [--data-dir DIR] [--config FILE]``
(stdio) or ``memory-core serve --http [--host 127.0.0.1] [--port 8765]`` (streamable HTTP at /mcp).
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from memory_core import TENANT_PATTERN, Settings
from memory_core.observe import Observer
from tools.auth import TenantScope
from tools.http.unencodable import marked_paths, sentence
from tools.mcp.arguments import ContainerJsonOnly, first_problem
from tools.mcp.context import ServerState, error_result
from tools.mcp.preview import PreviewShaper
from tools.mcp.stdio_replies import ParseErrorReplies
from tools.mcp.stores import Stores
from tools.mcp.surface import (
    describe,
    inline_definitions,
    lean_schema,
    live_defaults,
    recall_cap,
    shape_tool_list,
    share_descriptions,
    surface_values,
    with_defaults,
)
from tools.registry import SPECS_BY_NAME, TOOL_SPECS

SERVER_NAME = "memory-core"
CORE_THREADS = 8

INSTRUCTIONS = (
    "Long-term memory shared by the agents of a tenant. After a context compaction, call "
    "recover_context first. Recall before acting; results are previews (expand with get_contents). "
    "Store turns, notes and decisions with add_memory; write a handoff with create_handoff before "
    "your session ends or your context is compacted. Correct a wrong memory with update_memory (the old "
    "version is kept as history; recall shows the newest). "
    "Identity: a connection bound to a tenant (bearer token or server config) does not list 'tenant' and "
    "fills it; naming another fails with TENANT_MISMATCH. Without a binding every call names its tenant "
    "(TENANT_REQUIRED otherwise). Likewise a connection bound to an agent fills 'viewer' and the author "
    "'agent' (AGENT_MISMATCH for another); unbound, pass your agent id as both ('viewer' lets a read "
    "see your private memories). "
    "Errors read '<CODE>: <sentence>'."
)

log = logging.getLogger(__name__)


class MemoryMCPServer(MCPServer[ServerState]):
    """``MCPServer`` whose SDK-raised tool errors also carry a stable code and one sentence, and whose
    tool calls are observed (``ServerState.observer``: metrics, the call's log line, its span)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        if context is None:
            return await self._call_tool(name, arguments, context)
        state = context.request_context.lifespan_context
        with state.observer.call(name, _tenant_of(state, arguments)) as record:
            try:
                result = await self._call_tool(name, arguments, context)
            except ToolError:
                record.outcome = "TOOL_ERROR"  # the SDK answers it as a tool error
                raise
            except Exception:
                record.outcome = "INTERNAL_ERROR"
                raise
            except BaseException:
                record.outcome = "CANCELLED"  # the client went away, or the server is stopping
                raise
            record.outcome = outcome_of(result)
            return result

    async def _call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None
    ) -> CallToolResult | InputRequiredResult:
        bad = marked_paths(_request_meta(context))
        if bad is not None:  # a lone surrogate in the call (tools/http/unencodable.py): its arguments never arrived
            return error_result("INVALID_INPUT", sentence(bad), field=bad[0])
        spec = SPECS_BY_NAME.get(name)
        if spec is None or name not in {tool.name for tool in await self.list_tools()}:
            return error_result("UNKNOWN_TOOL", f"There is no tool named {name[:80]!r}.")
        if context is not None:
            granted = context.request_context.lifespan_context.scope.access()
            if not granted.allows(spec.scope):
                return error_result("SCOPE_DENIED", f"This connection's scope is '{granted}'; {name} needs "
                                    f"'{spec.scope}' (a token or MEMORY_CORE_SCOPE grants it).",
                                    scope=granted.value, needed=spec.scope.value, tool=name)
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError as exc:
            # The operator gets the traceback in the server log; the caller a sentence, never a stack trace.
            cause = exc.__cause__ or exc
            log.error("tool %s failed unexpectedly", name, exc_info=(type(cause), cause, cause.__traceback__))
            return error_result("INTERNAL_ERROR", f"{name} failed unexpectedly; the server log has the details.")
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                field, problem = first_problem(exc.__cause__)
                return error_result("INVALID_INPUT", problem, field=field)
            raise

    async def run_stdio_async(self) -> None:
        """The SDK's stdio loop, with a JSON-RPC error reply to every line it cannot parse."""
        async with stdio_server() as (read_stream, write_stream):
            lowlevel = self._lowlevel_server
            replying = ParseErrorReplies(read_stream, write_stream)
            await lowlevel.run(replying, write_stream, lowlevel.create_initialization_options())


def _tenant_of(state: ServerState, arguments: dict[str, Any]) -> str | None:
    """The tenant a call acts for, for its metrics and log line: the bound one, else a well-formed argument."""
    bound = state.scope.bound()
    if bound is not None:
        return bound
    named = arguments.get("tenant")
    return named if isinstance(named, str) and TENANT_PATTERN.fullmatch(named) else None  # never a malformed string


def outcome_of(result: CallToolResult | InputRequiredResult) -> str:
    """``ok``, or the code of a tool error (``error_result``'s ``{"error": {"code": ...}}``)."""
    if not isinstance(result, CallToolResult) or not result.is_error:
        return "ok"
    error = (result.structured_content or {}).get("error")
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) and code.isupper() and len(code) <= 40 else "TOOL_ERROR"


def _request_meta(context: Context[ServerState, Any] | None) -> object:
    try:
        return None if context is None else context.request_context.meta
    except ValueError:  # a context made outside a request
        return None


async def refuse_unencodable(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> Any:
    """``ServerMiddleware``: a request other than ``tools/call`` that held a lone surrogate (its
    stand-in carries the marker, see :mod:`tools.http.unencodable`) gets ``-32602`` under its own id."""
    if ctx.method != "tools/call":
        bad = marked_paths((ctx.params or {}).get("_meta"))
        if bad is not None:
            raise MCPError(code=INVALID_PARAMS, message=sentence(bad), data={"code": "INVALID_INPUT",
                                                                             "field": bad[0]})
    return await call_next(ctx)


def build_server(
    settings: Settings,
    stores: Stores,
    *,
    token_verifier: TokenVerifier | None = None,
    on_ready: Callable[[], None] | None = None,
    observer: Observer | None = None,
) -> MemoryMCPServer:
    """The MCP server for ``settings`` over ``stores`` (its lifespan closes them at shutdown).

    ``token_verifier`` turns on bearer authentication (HTTP only): the SDK's middleware answers
    401 to a request without a token it accepts. ``on_ready`` runs once the lifespan has started.
    ``observer`` sees every tool call (the serving process builds it: :mod:`memory_core.observe`).
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        try:
            state = ServerState(
                stores=stores,
                shaper=PreviewShaper(
                    preview_chars=settings.recall.preview_chars,
                    full_content_budget_chars=settings.recall.full_content_budget_chars,
                    recover_turn_chars=settings.recover.turn_preview_chars,
                ),
                scope=TenantScope(settings.server.tenant, settings.server.agent, settings.server.scope),
                limiter=anyio.CapacityLimiter(CORE_THREADS),
                add_limiter=anyio.CapacityLimiter(settings.write.batch_max) if settings.write.batch_max > 1 else None,
                recall_limit_cap=recall_cap(settings),
                observer=observer or Observer(),
            )
            if on_ready is not None:
                on_ready()
            yield state
        finally:
            await stores.close()

    auth: dict[str, Any] = {}
    if token_verifier is not None:
        # Resource-server mode with our own verifier: no OAuth routes are mounted; the
        # issuer URL is required by AuthSettings but unused without an auth provider.
        url = f"http://{settings.server.host}:{settings.server.port}"
        auth = {"token_verifier": token_verifier, "auth": AuthSettings(issuer_url=url, resource_server_url=None)}
    values, defaults = surface_values(settings), live_defaults(settings)
    tools = []
    for spec in TOOL_SPECS:  # the registry: one ToolSpec per tool (tools/registry.py)
        fn = spec.function()
        tool = Tool.from_function(fn, name=spec.name, description=describe(fn, values),
                                  annotations=ToolAnnotations(**spec.hints()), structured_output=False)
        tool.fn_metadata = ContainerJsonOnly.model_construct(**dict(tool.fn_metadata))
        lean = lean_schema(inline_definitions(tool.parameters), values)
        tool.parameters = with_defaults(lean, {arg: defaults[arg] for arg in spec.settings_defaults})
        tools.append(tool)
    by_name = {tool.name: tool for tool in tools}
    for spec in TOOL_SPECS:
        if spec.same_arguments_as is not None:
            like = by_name[spec.same_arguments_as]
            by_name[spec.name].parameters = share_descriptions(by_name[spec.name].parameters, like.parameters)
    return MemoryMCPServer(
        SERVER_NAME,
        version=package_version(),
        instructions=INSTRUCTIONS,
        lifespan=lifespan,
        log_level="WARNING",
        tools=tools,
        middleware=[refuse_unencodable, shape_tool_list],
        **auth,
    )


def package_version() -> str:
    """The installed memory-core version, for ``serverInfo.version``."""
    try:
        return importlib.metadata.version("memory-core")
    except importlib.metadata.PackageNotFoundError:  # a source checkout that was never installed
        return "0+unknown"
