"""The session tools: recover_context (after a compaction) and summarize_session.

Each tool resolves the tenant, makes one service call and shapes the result; the
docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memory_core import Scope
from tools.mcp.context import Ctx, mcp_tool, state_of
from tools.mcp.identity import Viewer, viewer_of
from tools.mcp.params import RECENT_TURNS_LIMIT_CAP, Session, Tenant

RecoverTurns = Annotated[
    int | None,
    Field(
        ge=1,
        le=RECENT_TURNS_LIMIT_CAP,
        description="Newest turns (fewer past a size budget).",
    ),
]


@mcp_tool
async def recover_context(
    ctx: Ctx,
    *,
    session: Session,
    tenant: Tenant = None,
    viewer: Viewer = None,
    turns: RecoverTurns = None,
) -> dict[str, Any]:
    """Call FIRST after a context compaction or when resuming: the latest handoff whole (or null),
    the session summary (stale=true: a newer one is coming), the newest turns as $recover_chars-char
    previews, next_cursor for query_recent_turns.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    store = state.scope.access().allows(Scope.WRITE)  # a read-scoped connection stores no summary
    recovery = await state.call(
        lambda core: core.recover_context(tenant_id, session, viewer=who, turns=turns, store_summary=store))
    return state.shaper.recovery(recovery)


@mcp_tool
async def summarize_session(ctx: Ctx, *, session: Session, tenant: Tenant = None) -> dict[str, Any]:
    """Summarize a session's shared memories in at most $summary_chars chars, stored as an episode;
    with a slow or missing model, summary_source=fallback. None shared: NOT_FOUND.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    episode = await state.call(lambda core: core.summarize_session(tenant_id, session))
    return episode.to_dict()
