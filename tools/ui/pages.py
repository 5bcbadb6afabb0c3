"""The inspector's pages: each parses its query string, calls one read, renders one template.

Handlers are plain functions (Starlette runs them on its thread pool, off the event loop);
every read goes through ``MemoryCore`` (the agents' reads) or :mod:`memory_core.operator` (the inspector,
the doctor check, disk use). Names travel in query strings (session names may hold ``/``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from memory_core import MEMORY_TYPES, InvalidInputError, MemoryCore, describe_stages
from memory_core.operator import Inspector, OperatorParts, disk_use
from tools.ui.auth import HostCheck, OperatorAuth
from tools.ui.health import DoctorMonitor
from tools.ui.render import page

SEARCH_LIMITS = (10, 20, 50, 100)
TIMELINE_PAGE = 25
SESSIONS_PAGE = 50
AGENT_LIST = 200
REVIEW_LIST = 50  # memories due for review on the tenant page, the longest due first


@dataclass
class UIState:
    core: MemoryCore  # the agents' reads (recall, recent turns)
    parts: OperatorParts  # the same store as the operator reads it
    inspector: Inspector
    monitor: DoctorMonitor
    auth: OperatorAuth
    hosts: HostCheck


def state(request: Request) -> UIState:
    ui: UIState = request.app.state.ui
    return ui


def context(request: Request, **values: Any) -> dict[str, Any]:
    return {"root": request.scope.get("root_path", ""), "tenant": None, "nav": "", **values}


def _text(request: Request, name: str, *, required: bool = False) -> str | None:
    value = request.query_params.get(name)
    if value is None or value == "":
        if required:
            raise InvalidInputError(f"The '{name}' parameter is required.", field=name)
        return None
    return value


def _int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise InvalidInputError(f"'{name}' must be an integer.", field=name) from exc


def tenants(request: Request) -> HTMLResponse:
    view = state(request).inspector.tenants()
    return page("tenants.html", context(request, view=view, nav="tenants"))


def tenant(request: Request) -> HTMLResponse:
    st = state(request)
    name = _text(request, "t", required=True)
    sessions = st.inspector.sessions(name, _int(request, "offset", 0), SESSIONS_PAGE)  # type: ignore[arg-type]
    agents = st.inspector.agents(str(name))
    due = st.inspector.review_due(str(name), REVIEW_LIST)
    return page("tenant.html", context(request, tenant=name, nav="sessions", sessions=sessions, agents=agents,
                                       page_size=SESSIONS_PAGE, due=due, due_cap=REVIEW_LIST))


def session(request: Request) -> HTMLResponse:
    st = state(request)
    name = str(_text(request, "t", required=True))
    sess = str(_text(request, "s", required=True))
    cursor = _text(request, "cursor")
    turns_only = request.query_params.get("only") == "turns"
    if turns_only:  # exactly the agents' query_recent_turns (shared turns)
        recent = st.core.query_recent_turns(name, sess, TIMELINE_PAGE, cursor)
        rows, next_cursor = recent.turns, recent.next_cursor
    else:
        timeline = st.inspector.timeline(name, sess, TIMELINE_PAGE, cursor)
        rows, next_cursor = timeline.rows, timeline.next_cursor
    summary = st.inspector.summary(name, sess)
    return page("session.html", context(request, tenant=name, nav="sessions", session=sess, rows=rows,
                                        next_cursor=next_cursor, paged=cursor is not None, summary=summary,
                                        turns_only=turns_only))


def memory(request: Request) -> HTMLResponse:
    st = state(request)
    name = str(_text(request, "t", required=True))
    as_of = _text(request, "as_of")
    detail = st.inspector.memory(name, str(_text(request, "ref", required=True)), as_of)
    return page("memory.html", context(request, tenant=name, nav="sessions", detail=detail, as_of=as_of,
                                       row=detail.check.memory, nb=detail.check.neighbours,
                                       depth=min(3, max(1, _int(request, "depth", 1)))))


def entity(request: Request) -> HTMLResponse:
    st = state(request)
    name = str(_text(request, "t", required=True))
    detail = st.inspector.entity(name, str(_text(request, "ref", required=True)))
    return page("entity.html", context(request, tenant=name, nav="sessions", detail=detail, e=detail.entity))


def search(request: Request) -> HTMLResponse:
    st = state(request)
    name = str(_text(request, "t", required=True))
    form = {k: request.query_params.get(k, "") for k in
            ("q", "type", "session", "agent", "channel", "source_id", "project", "project_id", "viewer", "deep",
             "collapse", "as_of", "include_stale")}
    limit = _int(request, "limit", 20)
    result, elapsed_ms = None, None
    if "q" in request.query_params:
        options: dict[str, Any] = {k: form[k] or None for k in ("type", "session", "agent", "channel", "source_id",
                                                               "viewer")}
        if form["project"] == "global":
            options["project_id"] = ""
        elif form["project"] == "project":
            options["project_id"] = form["project_id"]
        started = time.perf_counter()
        result = st.core.recall(name, form["q"], limit=limit, deep=form["deep"] == "on",
                                collapse=form["collapse"] != "off", as_of=form["as_of"] or None,
                                include_stale=form["include_stale"] == "on", **options)
        elapsed_ms = (time.perf_counter() - started) * 1000
    agents = st.inspector.agents(name)[:AGENT_LIST]
    return page("search.html", context(
        request, tenant=name, nav="search", form=form, limit=limit, limits=SEARCH_LIMITS, result=result,
        elapsed_ms=elapsed_ms, types=sorted(MEMORY_TYPES | {"episode"}), agents=agents,
        stages=describe_stages(result.diagnostics["stages_ms"]) if result and "stages_ms" in result.diagnostics
        else None,
        session_names=st.inspector.session_names(name),
    ))


def health(request: Request) -> HTMLResponse:
    st = state(request)
    check = st.monitor.state()
    journal_total, journal = st.inspector.journal()
    parts = st.parts
    settings = parts.settings
    stores = {
        "data directory": str(parts.data_dir),
        "vector store": f"Chroma ({settings.storage.chroma})",
        "embedder": f"{parts.embedder.name} ({parts.embedder.dimension} dimensions)",
        "summaries": (f"model {settings.model_provider.model}" if settings.model_provider.enabled
                      else "extractive (no model_provider configured)"),
        "single adds": _batching(st.core),
    }
    return page("health.html", context(
        request, nav="health", check=check, age_s=(time.time() - check.finished_at) if check.finished_at else None,
        journal=journal, journal_total=journal_total, disk=disk_use(parts), stores=stores,
        recovered=list(parts.recovered),
    ))


def _batching(core: MemoryCore) -> str:
    """How concurrent single adds have been batched since the store opened (group commit)."""
    b = core.write_batching()
    if b is None:
        return "each written alone (write.batch_max = 1)"
    return (f"{b['rows']:,} written in {b['batches']:,} batches since start: {b['mean']:g} a batch on average, "
            f"{b['largest']:,} at most (write.batch_max = {core.settings.write.batch_max})")


def graph_json(request: Request) -> JSONResponse:
    """``{root, nodes: [{id, kind, label, depth, …}], edges: [{source, target, kind}], truncated}``."""
    st = state(request)
    name = str(_text(request, "t", required=True))
    hood = st.inspector.neighbourhood(name, str(_text(request, "ref", required=True)), _int(request, "depth", 1))
    return JSONResponse(hood.to_dict())


def not_found(request: Request) -> Response:
    return page("error.html", context(request, code="NOT_FOUND", message="There is no such page."), status=404)
