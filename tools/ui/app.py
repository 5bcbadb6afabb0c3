"""The inspector as a Starlette app, mounted at ``/ui`` (by ``serve --http`` or ``memory-core ui``).

Every request passes one guard, in this order:

1. Host and Origin must name this machine                          -> else 403
2. static assets and the login page are open; everything else needs the operator:
   operator token (bearer) or login cookie                          -> the page
   a tenant-bound agent token                                       -> 403
   nothing / an unknown token: HTML GETs go to the login form, the rest get 401
3. no operator token configured: every page is 403, naming how to enable it

Request bodies are bounded before they are read: the login form is the only body the
inspector takes, so every route refuses one over ``FORM_MAX_BYTES`` (413) — under
``memory-core ui`` by the HTTP guard around the whole app (:func:`standalone_app`), under
``serve --http`` by that server's guard (a cap for ``/ui``), and in ``login`` itself.

Responses carry a strict Content-Security-Policy (scripts, styles and images from this origin
only: no inline script can run even if escaping ever failed), ``no-store`` and a
``Server-Timing`` header with the server-side time (read by ``bench/latency/ui.py``).
The only POSTs are login and logout; nothing else changes state.
"""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import parse_qs, quote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware, RequestResponseEndpoint
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from memory_core import InvalidInputError, MemoryCore, MemoryCoreError, NotFoundError
from memory_core.operator import Inspector
from tools.http.guard import FORM_MAX_BYTES, HttpGuard
from tools.ui import pages
from tools.ui.auth import COOKIE, SESSION_TTL_S, Caller, HostCheck, OperatorAuth, safe_next
from tools.ui.health import DoctorMonitor
from tools.ui.render import page

STATIC_DIR = Path(__file__).with_name("static")
OPEN_PATHS = ("/login", "/static/")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
DISABLED = ("The inspector is disabled: no operator token is configured. Run `memory-core token --operator`, "
            "put the printed line under [server] as operator_token_sha256, and restart.")


class Guard(BaseHTTPMiddleware):
    async def dispatch(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        started = time.perf_counter()
        response = await self._admit(request, call_next)
        response.headers["Content-Security-Policy"] = CSP
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "same-origin"  # "no-referrer" makes Chromium send Origin: null on POST
        response.headers["X-Frame-Options"] = "DENY"
        response.headers.setdefault("Cache-Control", "no-store")
        response.headers["Server-Timing"] = f"app;dur={(time.perf_counter() - started) * 1000:.2f}"
        return response

    async def _admit(self, request: Request, call_next: RequestResponseEndpoint) -> Response:
        ui: pages.UIState = request.app.state.ui
        if not ui.hosts.host_ok(request.headers.get("host")):
            return PlainTextResponse("Forbidden: the Host header does not name this machine.", status_code=403)
        if not ui.hosts.origin_ok(request.headers.get("origin")):
            return PlainTextResponse("Forbidden: cross-origin request.", status_code=403)
        root = request.scope.get("root_path", "")
        rel = request.url.path[len(root):] if request.url.path.startswith(root) else request.url.path
        if rel.startswith(OPEN_PATHS):
            return await call_next(request)
        if not ui.auth.enabled:
            return page("error.html", pages.context(request, code="UI_DISABLED", message=DISABLED), status=403)
        caller = ui.auth.classify(request.headers, request.cookies)
        if caller is Caller.OPERATOR:
            return await call_next(request)
        if caller is Caller.AGENT:
            return page("error.html", pages.context(
                request, code="FORBIDDEN", message="Agent tokens cannot open the inspector; use the operator token."),
                status=403)
        wants_html = request.method == "GET" and "text/html" in request.headers.get("accept", "")
        if wants_html and "authorization" not in request.headers:
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse(f"{root}/login?next={quote(target, safe='')}", status_code=303)
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "The operator token is required."}},
                            status_code=401, headers={"WWW-Authenticate": 'Bearer realm="memory-core-ui"'})


def login_form(request: Request) -> Response:
    ui: pages.UIState = request.app.state.ui
    return page("login.html", pages.context(request, next=request.query_params.get("next", ""),
                                            error=None if ui.auth.enabled else DISABLED))


async def login(request: Request) -> Response:
    ui: pages.UIState = request.app.state.ui
    form = await _small_form(request)
    if form is None:
        return PlainTextResponse("Form too large.", status_code=413)
    root = request.scope.get("root_path", "")
    caller = ui.auth.classify_token(form.get("token", "").strip()) if form.get("token") else Caller.UNKNOWN
    if caller is not Caller.OPERATOR:
        message = ("That is an agent token: the inspector needs the operator token." if caller is Caller.AGENT
                   else DISABLED if not ui.auth.enabled else "Wrong token.")
        status = 403 if caller is Caller.AGENT or not ui.auth.enabled else 401
        return page("login.html", pages.context(request, next=form.get("next", ""), error=message), status=status)
    response = RedirectResponse(safe_next(form.get("next"), root), status_code=303)
    response.set_cookie(COOKIE, ui.auth.open_session(), max_age=SESSION_TTL_S, path=root or "/", httponly=True,
                        samesite="strict", secure=request.url.scheme == "https")
    return response


async def _small_form(request: Request) -> dict[str, str] | None:
    """The posted form, read at most ``FORM_MAX_BYTES`` far; None when it is (or says it is) larger."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > FORM_MAX_BYTES):
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_MAX_BYTES:
            return None
    return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}


async def logout(request: Request) -> Response:
    ui: pages.UIState = request.app.state.ui
    ui.auth.close_session(request.cookies.get(COOKIE))
    root = request.scope.get("root_path", "")
    response = RedirectResponse(f"{root}/login", status_code=303)
    response.delete_cookie(COOKIE, path=root or "/", httponly=True, samesite="strict")
    return response


def _error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MemoryCoreError)
    status = 404 if isinstance(exc, NotFoundError) else 400 if isinstance(exc, InvalidInputError) else 500
    if request.url.path.endswith("/api/graph"):
        return JSONResponse({"error": {"code": exc.code, "message": exc.message}}, status_code=status)
    return page("error.html", pages.context(request, code=exc.code, message=exc.message), status=status)


def build_ui_app(core: MemoryCore) -> Starlette:
    """The inspector over an open core; mount it at ``/ui``. Read-only except login/logout."""
    settings = core.settings.server
    app = Starlette(
        routes=[
            Route("/", pages.tenants),
            Route("/tenant", pages.tenant),
            Route("/session", pages.session),
            Route("/memory", pages.memory),
            Route("/entity", pages.entity),
            Route("/search", pages.search),
            Route("/health", pages.health),
            Route("/api/graph", pages.graph_json),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        ],
        middleware=[Middleware(Guard)],
        exception_handlers={MemoryCoreError: _error, 404: lambda r, _e: pages.not_found(r)},
    )
    parts = core.operator_parts()
    app.state.ui = pages.UIState(
        core=core, parts=parts, inspector=Inspector(parts), monitor=DoctorMonitor(parts),
        auth=OperatorAuth(settings.operator_token_sha256, settings.tokens.keys()), hosts=HostCheck(settings.host),
    )
    return app


def standalone_app(core: MemoryCore) -> ASGIApp:
    """``memory-core ui``: the inspector alone (no MCP endpoint); ``/`` redirects to ``/ui/``.

    Every route's body is bounded before it is read (no route takes more than a login form);
    Host and Origin are the inspector's own checks.
    """
    app = Starlette(routes=[
        Route("/", lambda _r: RedirectResponse("/ui/", status_code=307)),
        Mount("/ui", build_ui_app(core)),
    ])
    return HttpGuard(app, policy=None, max_request_bytes=FORM_MAX_BYTES, max_inflight_bytes=FORM_MAX_BYTES * 64,
                     body_timeout_s=core.settings.server.body_timeout_s)
