"""The MCP server: tool registry, lifespan, and the stdio / streamable HTTP transports.

Composition root for the MCP boundary: ``memory-core serve`` reads settings once, the stores open
once (``MemoryCore.open``; the shared server opens them right after it answers, see
:mod:`tools.bridge.deferred_core`) and the lifespan hands a ``ServerState`` to every tool through
the SDK's typed context. Errors map once, here and in ``tools.mcp.context``:

- ``MemoryCoreError``            -> tool error ``<CODE>: <sentence>`` (its own code)
- arguments failing the schema, or one the tool does not take -> tool error ``INVALID_INPUT`` naming it
- unknown tool name              -> tool error ``UNKNOWN_TOOL``
- a tool the connection's scope does not allow -> tool error ``SCOPE_DENIED`` (nothing runs)
- anything else (a bug)          -> tool error ``INTERNAL_ERROR``; traceback in the server log only
- stdio line that is not JSON-RPC -> JSON-RPC error ``-32700`` / ``-32600`` (``tools.mcp.stdio_replies``)
- a request holding a lone surrogate -> tools/call: tool error ``INVALID_INPUT``; others: ``-32602``,
  under the request's own id (``tools.http.unencodable``, on every transport)
- HTTP, before any tool runs      -> 421 foreign Host, 403 foreign Origin, 413 body over
  ``server.max_request_bytes``, 503 past ``server.max_inflight_bytes`` (``tools.http.guard``)

Run it with the CLI (one argument parser): ``memory-core serve [--data-dir DIR] [--config FILE]``
(stdio) or ``memory-core serve --http [--host 127.0.0.1] [--port 8765]`` (streamable HTTP at /mcp).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import logging
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.auth.provider import TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.context import CallNext, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import FuncMetadata
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError
from starlette.types import ASGIApp

from memory_core.settings.schema import Settings
from tools.auth import TenantScope, TokenTenantVerifier, check_bind, check_token_hashes
from tools.bridge import shared_server
from tools.bridge.auth import ActivityTracker, BridgeAuth, BridgeTokenVerifier, ChainedTokenVerifier, ServerProof
from tools.bridge.deferred_core import (
    DeferredCore,
    DeferredUI,
    OpenedCore,
    Stores,
    claim_when_free,
    open_stores,
    open_stores_warming,
)
from tools.bridge.shared_server import new_secret
from tools.http.guard import FORM_MAX_BYTES, BodyCap, HostPolicy, HttpGuard, check_body_budget
from tools.http.listen import listen, url_host
from tools.http.unencodable import UnencodableRequests, marked_paths, sentence
from tools.mcp.context import ServerState, error_result
from tools.mcp.preview import PreviewShaper
from tools.mcp.stdio_replies import ParseErrorReplies
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

if TYPE_CHECKING:
    from memory_core.service import MemoryCore  # loads with the stores, not with the server

SERVER_NAME = "memory-core"
MCP_PATH = "/mcp"
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
    """``MCPServer`` whose SDK-raised tool errors also carry a stable code and one sentence."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[ServerState, Any] | None = None
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
                return error_result("INVALID_INPUT", _first_problem(exc.__cause__),
                                    field=_location(exc.__cause__.errors()[0]))
            raise

    async def run_stdio_async(self) -> None:
        """The SDK's stdio loop, with a JSON-RPC error reply to every line it cannot parse."""
        async with stdio_server() as (read_stream, write_stream):
            lowlevel = self._lowlevel_server
            replying = ParseErrorReplies(read_stream, write_stream)
            await lowlevel.run(replying, write_stream, lowlevel.create_initialization_options())


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


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"), (int, "an integer"), (float, "a number"), (str, "a string"),
    (list, "an array"), (dict, "an object"), (type(None), "null"),
)


def _json_type(value: object) -> str:
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def _location(problem: ErrorDetails) -> str:
    return ".".join(str(part) for part in problem["loc"]) or "arguments"


def _first_problem(error: ValidationError) -> str:
    """One sentence naming the first bad argument, what it got when the type was wrong, and how
    many more problems there are."""
    problems = error.errors()
    first = problems[0]
    field = _location(first)
    message = "is required" if first["type"] == "missing" else first["msg"][:1].lower() + first["msg"][1:]
    if first["type"].endswith("_type"):
        message += f" (got {_json_type(first['input'])})"
    more = f" ({len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return f"Argument '{field}' {message}{more}."


def build_server(
    settings: Settings,
    *,
    data_dir: str | None = None,
    core: MemoryCore | None = None,
    stores: Stores | None = None,
    with_tokens: bool = False,
    on_ready: Callable[[], None] | None = None,
    bridge_verifier: BridgeTokenVerifier | None = None,
) -> MemoryMCPServer:
    """The server for ``settings``; ``with_tokens`` turns on bearer auth (HTTP only).

    The lifespan opens the stores (``data_dir``, default ``storage.data_dir``), or takes over
    an already opened ``core`` or ``stores`` that open later; either way it closes them at shutdown.
    """

    @asynccontextmanager
    async def lifespan(_: MCPServer[ServerState]) -> AsyncIterator[ServerState]:
        held = stores or OpenedCore(core if core is not None else await open_core(settings, data_dir))
        try:
            state = ServerState(
                stores=held,
                shaper=PreviewShaper(
                    preview_chars=settings.recall.preview_chars,
                    full_content_budget_chars=settings.recall.full_content_budget_chars,
                    recover_turn_chars=settings.recover.turn_preview_chars,
                ),
                scope=TenantScope(settings.server.tenant, settings.server.agent, settings.server.scope),
                limiter=anyio.CapacityLimiter(CORE_THREADS),
                add_limiter=anyio.CapacityLimiter(settings.write.batch_max) if settings.write.batch_max > 1 else None,
                recall_limit_cap=recall_cap(settings),
            )
            if on_ready is not None:
                on_ready()
            yield state
        finally:
            await held.close()

    auth: dict[str, Any] = {}
    if with_tokens:
        # Resource-server mode with our own verifier: no OAuth routes are mounted; the
        # issuer URL is required by AuthSettings but unused without an auth provider.
        url = f"http://{settings.server.host}:{settings.server.port}"
        configured: TokenVerifier = TokenTenantVerifier(settings.server.tokens)
        auth = {
            "token_verifier": configured if bridge_verifier is None else ChainedTokenVerifier(
                [bridge_verifier, configured]),
            "auth": AuthSettings(issuer_url=url, resource_server_url=None),
        }
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


class ContainerJsonOnly(FuncMetadata):
    """Tool arguments are validated strictly, as the JSON types the schema states.

    - The SDK JSON-decodes string arguments of any non-``str`` parameter: the string ``"null"``
      became None for every ``str | None`` argument (a session named "null" lost its filter), and
      ``refs``, ``entities``, ``metadata``, ``source``, ``exclude_contents`` or ``context`` sent
      as a JSON *string* became a list or an object. Nothing is decoded: a string where the
      schema says array or object is the wrong type.
    - pydantic's lax mode turned ``limit: "10"`` or ``true`` into 10 or 1, ``deep: "yes"`` into
      True and ``salience: true`` into 1.0; strict mode refuses them, so a wrong type is
      INVALID_INPUT naming the argument instead of a silently different call.
    - An argument the tool does not take was dropped: ``visiblity: "agent"`` (a typo) stored a
      private memory shared. It is refused, naming it (with the nearest argument the tool takes),
      before anything else is checked.
    """

    def pre_parse_json(self, data: dict[str, Any]) -> dict[str, Any]:
        return data

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        taken = [field.alias or name for name, field in self.arg_model.model_fields.items()]
        unknown = [name for name in arguments_to_validate if name not in taken]
        if unknown:
            raise ValidationError.from_exception_data("arguments", [_unknown(name, arguments_to_validate[name], taken)
                                                                    for name in unknown])
        model = self.arg_model.model_validate(self.pre_parse_json(arguments_to_validate), strict=True)
        return model.model_dump_one_level()


def _unknown(name: str, value: object, taken: list[str]) -> InitErrorDetails:
    """The problem of an argument the tool does not take, with the nearest one it does take."""
    near = difflib.get_close_matches(name, taken, n=1)
    hint = f" (did you mean '{near[0]}'?)" if near else ""
    error = PydanticCustomError("unknown_argument", "is not an argument of this tool{hint}", {"hint": hint})
    return {"type": error, "loc": (name,), "input": value}


async def open_core(settings: Settings, data_dir: str | None) -> MemoryCore:
    """Open the stores on a worker thread (loading a model or recovering may take a while)."""
    return await anyio.to_thread.run_sync(lambda: open_stores(settings, data_dir))


async def serve_stdio(settings: Settings, *, data_dir: str | None = None) -> None:
    """Serve one client over stdin/stdout.

    The stores open before the transport starts, so a locked or broken data directory
    fails with its own message instead of a dropped connection.
    """
    check_token_hashes(settings.server.tokens)
    core = await open_core(settings, data_dir)
    core.warm_up_in_background()  # the embedder loads while the client initializes, not on its first call
    await build_server(settings, core=core).run_stdio_async()


async def serve_http(
    settings: Settings,
    *,
    data_dir: str | None = None,
    announce: Callable[[str], None] | None = None,
    shared: bool = False,
) -> None:
    """Serve streamable HTTP on ``settings.server.host:port`` (port 0 picks a free one).

    ``announce`` receives the endpoint URL once the socket listens (and, but for ``shared``,
    the stores are open). The server also announces itself in its data directory, so stdio
    launches bridge to it (:mod:`tools.bridge.shared_server`); ``shared`` is the background server
    those launches start: it serves bridged clients only, stops after ``server.shared_idle_s``
    without any, and answers before its stores are open (it claims their lock first, so
    STORE_LOCKED still fails its start; :mod:`tools.bridge.deferred_core`).
    """
    host, port, tokens = settings.server.host, settings.server.port, settings.server.tokens
    check_token_hashes(tokens)
    check_bind(host, tokens)
    check_body_budget(settings.server.max_request_bytes, settings.server.max_inflight_bytes)
    sock = listen(host, port, key="server.port")
    bound_port = sock.getsockname()[1]
    url = f"http://{url_host(sock, host)}:{bound_port}{MCP_PATH}"
    # before uvicorn: errors keep their own message
    stores: Stores
    if shared:
        lock = await claim_when_free(settings, data_dir)
        deferred = DeferredCore(partial(open_stores_warming, settings, lock.data_dir), lock, on_open=_warm_up)
        stores, root, begin = deferred, lock.data_dir, deferred.begin
    else:
        core = await open_core(settings, data_dir)
        stores, root = OpenedCore(core), core.data_dir
        begin = partial(_warm_up, core)
    secret = new_secret()
    bridge = BridgeTokenVerifier(secret)
    local_url = url.replace(f"//{host}:", "//127.0.0.1:") if host in ("0.0.0.0", "") else url

    def ready() -> None:
        shared_server.announce(root, local_url, secret, shared=shared,
                               max_request_bytes=settings.server.max_request_bytes)
        begin()  # the shared server's stores open now; then the embedder and Chroma load, not on the first call
        if announce is not None:
            announce(url)

    server = build_server(settings, stores=stores, with_tokens=bool(tokens), on_ready=ready, bridge_verifier=bridge)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=host,
        max_request_body_size=settings.server.max_request_bytes,
        # Host/Origin are checked by HttpGuard for every loopback spelling, not by the SDK's
        # exact-string test, so one policy decides (tools/http/guard.py)
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.mount("/ui", DeferredUI(stores, _inspector))
    guarded: ASGIApp = HttpGuard(
        UnencodableRequests(app, MCP_PATH),
        policy=HostPolicy.for_bind(host, bound_port),
        max_request_bytes=settings.server.max_request_bytes,
        max_inflight_bytes=settings.server.max_inflight_bytes,
        body_timeout_s=settings.server.body_timeout_s,
        path_caps={"/ui": BodyCap(FORM_MAX_BYTES, "the inspector takes no more than a login form")},
    )
    # without configured tokens, the bridge token is checked on the headers, before any body is read
    inner = guarded if tokens else BridgeAuth(guarded, bridge, require=shared)
    tracker = ActivityTracker(inner, bridge)
    # open streams (GET, bridge attachments) must not hold a stopping server forever
    config = uvicorn.Config(ServerProof(tracker, secret), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=3)
    userver = _WithdrawingServer(config, partial(shared_server.withdraw, root))
    try:
        async with anyio.create_task_group() as tasks:
            if isinstance(stores, DeferredCore):
                stores.bind(tasks)
            if shared:
                tasks.start_soon(_stop_when_idle, userver, tracker, settings.server.shared_idle_s, root)
            await userver.serve(sockets=[sock])
            tasks.cancel_scope.cancel()
    finally:
        shared_server.withdraw(root)


class _WithdrawingServer(uvicorn.Server):
    """uvicorn's server, withdrawing the announcement as soon as it starts shutting down.

    On SIGTERM uvicorn shuts down gracefully and then raises the signal again, which ends the
    process before any ``finally`` of ``serve_http`` runs: a plain ``kill`` left a stale record.
    """

    def __init__(self, config: uvicorn.Config, withdraw: Callable[[], None]) -> None:
        super().__init__(config)
        self._withdraw = withdraw

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._withdraw()  # new launches start a fresh server instead of joining this one
        await super().shutdown(sockets)


def _warm_up(core: MemoryCore) -> None:
    core.warm_up_in_background()


def _inspector(core: MemoryCore) -> ASGIApp:
    from tools.ui import build_ui_app  # the operator's read-only inspector; jinja2 loads on its first page

    return build_ui_app(core)


async def _stop_when_idle(userver: uvicorn.Server, tracker: ActivityTracker, idle_s: float, data_dir: Path) -> None:
    """Stop the shared server once no client has had a request open (a GET stream counts) for ``idle_s``."""
    while tracker.idle_for() < idle_s:
        await anyio.sleep(min(1.0, idle_s / 4))
    shared_server.withdraw(data_dir)  # new launches start a fresh server instead of joining this one
    userver.should_exit = True
