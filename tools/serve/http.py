"""``memory-core serve --http``: streamable HTTP at ``/mcp``, the inspector at ``/ui``, in one process.

What this process puts around the MCP server (:func:`tools.mcp.server.build_server`), outermost
first:

- :class:`tools.serve.requests.RequestIds`: each request's id (``X-Request-Id``), responses counted;
- :class:`tools.serve.probes.ProbeRoutes`: ``/healthz`` and ``/readyz``, unauthenticated;
- :class:`tools.serve.metrics.MetricsRoute`: ``/metrics`` behind a token, when metrics are on and not
  on a listener of their own (``metrics.port``);
- :class:`tools.serve.bridged.ServerProof` answers a bridge's hello (the record's secret);
- :class:`tools.serve.reembed_route.ReembedRoute` runs the directory owner's ``memory-core reembed`` in this
  process (an operator token of the record's secret);
- :class:`tools.serve.bridged.ActivityTracker` counts bridged clients (the shared server stops
  after ``server.shared_idle_s`` without any);
- :class:`tools.serve.bridged.BridgeAuth` binds a bridged request by its token when no
  ``[server.tokens]`` are configured (with tokens, the SDK's bearer middleware checks both kinds);
- :class:`tools.http.guard.HttpGuard`: Host/Origin, body budgets and timeouts, before a body is read;
- :class:`tools.http.unencodable.UnencodableRequests`: a request holding a lone surrogate is
  answered under its own id;
- the SDK's streamable HTTP app at ``/mcp``, stateless (:class:`Stateless`), and the read-only
  inspector at ``/ui`` (:class:`DeferredUI`: built over the stores once they are open).

Sessions are stateless: the server issues no ``Mcp-Session-Id`` and keeps nothing between requests
(every request carries its bearer token, which binds tenant, agent and scope), so a client connected
before a restart goes on working after it, whatever client it is — no session id for the new
process to reject with 404, which clients of the streamable HTTP transport do not recover from.
Nothing is lost: the server sends no requests of its own to clients (no sampling, elicitation or
roots), so the standalone GET stream has nothing to carry and is refused (405, as the transport
allows).

Logging (text or JSON lines), metrics and traces are set up here from ``[logs]``, ``[metrics]`` and
``[tracing]`` (:mod:`memory_core.observe`); each tool call is observed by the MCP server itself. The
background consolidation schedule (``consolidation.every_s``, off by default) runs here too
(:mod:`tools.serve.upkeep`) and stops with the server.

The server announces itself in its data directory once it listens (:mod:`tools.server_record`),
and withdraws the record as soon as it starts stopping.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_core import MemoryCoreError, Settings
from memory_core.observe import Observer, configure_logs
from tools import server_record
from tools.auth import TokenTenantVerifier, check_bind, check_token_hashes
from tools.http.guard import FORM_MAX_BYTES, BodyCap, HostPolicy, HttpGuard, check_body_budget
from tools.http.listen import listen, url_host
from tools.http.unencodable import UnencodableRequests
from tools.mcp.server import build_server, package_version
from tools.mcp.stores import OpenedCore, Stores
from tools.registry import TOOL_SPECS
from tools.serve.bridged import ActivityTracker, BridgeAuth, BridgeTokenVerifier, ChainedTokenVerifier, ServerProof
from tools.serve.deferred_core import DeferredCore, claim_when_free, open_core, open_stores_warming
from tools.serve.probes import ProbeRoutes, Readiness, reply
from tools.serve.reembed_route import ReembedRoute
from tools.serve.requests import RequestIds
from tools.serve.upkeep import start_upkeep
from tools.server_record import MCP_PATH

if TYPE_CHECKING:
    from memory_core import MemoryCore  # loads with the stores, not with the server

log = logging.getLogger(__name__)


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
    launches bridge to it (:mod:`tools.server_record`); ``shared`` is the background server
    those launches start: it serves bridged clients only, stops after ``server.shared_idle_s``
    without any, and answers before its stores are open (it claims their lock first, so
    STORE_LOCKED still fails its start; :mod:`tools.serve.deferred_core`).
    """
    host, port, tokens = settings.server.host, settings.server.port, settings.server.tokens
    check_token_hashes(tokens)
    check_bind(host, tokens)
    check_body_budget(settings.server.max_request_bytes, settings.server.max_inflight_bytes)
    configure_logs(settings.logs.format, settings.logs.level)
    observer = Observer.from_settings(settings, tools=[spec.name for spec in TOOL_SPECS], version=package_version())
    if observer.metrics is not None:
        from tools.serve import metrics as metrics_http  # prometheus_client loads only when metrics are on

        metrics_http.check_metrics_settings(settings)
    sock = listen(host, port, key="server.port")
    bound_port = sock.getsockname()[1]
    metrics_listener = None  # bound now too: a busy metrics port fails the start before the stores open
    if observer.metrics is not None and settings.metrics.port is not None:
        metrics_listener = metrics_http.metrics_listener(settings, observer.metrics)
    url = f"http://{url_host(sock, host)}:{bound_port}{MCP_PATH}"
    # before uvicorn: errors keep their own message
    stores: Stores
    if shared:
        lock = await claim_when_free(settings, data_dir)
        deferred = DeferredCore(partial(open_stores_warming, settings, lock.data_dir), lock)
        stores, root, begin = deferred, lock.data_dir, deferred.begin
    else:
        core = await open_core(settings, data_dir)
        stores, root = OpenedCore(core), core.data_dir
    readiness = Readiness(stores)
    if isinstance(stores, DeferredCore):
        stores.on_open = readiness.warm_up
    else:
        begin = partial(readiness.warm_up, core)
    secret = server_record.new_secret()
    bridge = BridgeTokenVerifier(secret)
    local_url = url.replace(f"//{host}:", "//127.0.0.1:") if host in ("0.0.0.0", "") else url

    def ready() -> None:
        server_record.announce(root, local_url, secret, shared=shared,
                               max_request_bytes=settings.server.max_request_bytes)
        log.info("serving streamable HTTP at %s (stateless: clients survive a restart)", url)
        if metrics_listener is not None:
            log.info("metrics at http://%s:%d/metrics", settings.metrics.host,
                     metrics_listener[0].getsockname()[1])
        begin()  # the shared server's stores open now; then the embedder and Chroma load, not on the first call
        if announce is not None:
            announce(url)

    # configured tokens: the SDK's bearer middleware checks them, a bridged client's token first
    verifier = ChainedTokenVerifier([bridge, TokenTenantVerifier(tokens)]) if tokens else None
    server = build_server(settings, stores, token_verifier=verifier, on_ready=ready, observer=observer)
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,  # sessions survive a restart (the module docstring)
        host=host,
        max_request_body_size=settings.server.max_request_bytes,
        # Host/Origin are checked by HttpGuard for every loopback spelling, not by the SDK's
        # exact-string test, so one policy decides (tools/http/guard.py)
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    app.mount("/ui", DeferredUI(stores, _inspector))
    guarded: ASGIApp = HttpGuard(
        Stateless(UnencodableRequests(app, MCP_PATH)),
        policy=HostPolicy.for_bind(host, bound_port),
        max_request_bytes=settings.server.max_request_bytes,
        max_inflight_bytes=settings.server.max_inflight_bytes,
        body_timeout_s=settings.server.body_timeout_s,
        path_caps={"/ui": BodyCap(FORM_MAX_BYTES, "the inspector takes no more than a login form")},
    )
    # without configured tokens, the bridge token is checked on the headers, before any body is read
    inner = guarded if tokens else BridgeAuth(guarded, bridge, require=shared)
    tracker = ActivityTracker(inner, bridge)
    reembedding = ReembedRoute(tracker, stores, secret)  # the owner's `memory-core reembed`, run here
    outer: ASGIApp = ServerProof(reembedding, secret)
    if observer.metrics is not None:
        metrics_http.watch_store(observer.metrics, stores, readiness, tracker, settings.metrics.store_counts_s)
        if metrics_listener is None:
            outer = metrics_http.MetricsRoute(outer, observer.metrics, metrics_http.access_hashes(settings))
    outer = RequestIds(ProbeRoutes(outer, readiness), observer.metrics)
    # open streams (GET, bridge attachments) must not hold a stopping server forever
    config = uvicorn.Config(outer, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    schedule = start_upkeep(settings, stores, observer)  # consolidation.every_s: off by default

    def stop_background() -> None:
        if schedule is not None:
            schedule.stop()  # waits for the merge in progress
        observer.close()

    userver = _WithdrawingServer(config, partial(server_record.withdraw, root), stop_background)
    try:
        async with anyio.create_task_group() as tasks:
            if isinstance(stores, DeferredCore):
                stores.bind(tasks)
            if shared:
                tasks.start_soon(_stop_when_idle, userver, tracker, settings.server.shared_idle_s, root,
                                 reembedding.busy)
            if metrics_listener is not None:
                tasks.start_soon(metrics_listener[1].serve, [metrics_listener[0]])
            await userver.serve(sockets=[sock])
            tasks.cancel_scope.cancel()
    finally:
        server_record.withdraw(root)
        stop_background()


class _WithdrawingServer(uvicorn.Server):
    """uvicorn's server, withdrawing the announcement as soon as it starts shutting down.

    On SIGTERM uvicorn shuts down gracefully and then raises the signal again, which ends the
    process before any ``finally`` of ``serve_http`` runs: a plain ``kill`` left a stale record
    (and would lose the spans still buffered: ``flush`` exports them once the last request is done, and stops the
    background consolidation after its merge in progress).
    """

    def __init__(self, config: uvicorn.Config, withdraw: Callable[[], None], flush: Callable[[], None]) -> None:
        super().__init__(config)
        self._withdraw = withdraw
        self._flush = flush

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self._withdraw()  # new launches start a fresh server instead of joining this one
        await super().shutdown(sockets)
        await anyio.to_thread.run_sync(self._flush)


def _inspector(core: MemoryCore) -> ASGIApp:
    from tools.ui import build_ui_app  # the operator's read-only inspector; jinja2 loads on its first page

    return build_ui_app(core)


async def _stop_when_idle(userver: uvicorn.Server, tracker: ActivityTracker, idle_s: float, data_dir: Path,
                          busy: Callable[[], bool]) -> None:
    """Stop the shared server once no client has had a request open (a GET stream counts) for ``idle_s``
    and no operator's run (a re-embed, ``busy``) goes on."""
    while tracker.idle_for() < idle_s or busy():
        await anyio.sleep(min(1.0, idle_s / 4))
    server_record.withdraw(data_dir)  # new launches start a fresh server instead of joining this one
    userver.should_exit = True


class Stateless:
    """In front of the SDK's stateless app: a GET (the standalone stream) is refused with 405.

    A stateless server sends nothing outside a request's own response, so the stream would stay
    empty while holding a connection and a task; after a restart, clients would retry it in vain.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "GET" and scope.get("path", "").startswith(MCP_PATH):
            await reply(send, 405, {"error": "method_not_allowed",
                                    "error_description": "This server keeps no sessions: POST each request."},
                        allow="POST")
            return
        await self.app(scope, receive, send)


class DeferredUI:
    """The inspector's ASGI app, built over the stores once they are open (first ``/ui`` request)."""

    def __init__(self, stores: Stores, build: Callable[[MemoryCore], ASGIApp]) -> None:
        self._stores = stores
        self._build = build
        self._app: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        app = self._app
        if app is None:
            try:
                core = await self._stores.get()
            except MemoryCoreError as exc:
                await _unavailable(send, f"{exc.code}: {exc.message}")
                return
            app = await anyio.to_thread.run_sync(self._build, core)  # imports jinja2; two first pages: one kept
            self._app = app
        await app(scope, receive, send)


async def _unavailable(send: Send, text: str) -> None:
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": text.encode()})
