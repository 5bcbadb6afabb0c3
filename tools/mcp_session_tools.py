"""The session tools: recover_context (after a compaction) and summarize_session.

Each tool resolves the tenant, makes one service call and shapes the result; the
docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from tools.mcp_context import Ctx, mcp_tool, state_of
from tools.mcp_identity import Viewer, viewer_of
from tools.mcp_params import RECENT_TURNS_LIMIT_CAP, RECENT_TURNS_LIMIT_DEFAULT, Session, Tenant

RecoverTurns = Annotated[
    int | None,
    Field(
        ge=1,
        le=RECENT_TURNS_LIMIT_CAP,
        description=f"Newest turns to include (default {RECENT_TURNS_LIMIT_DEFAULT}, at most "
        f"{RECENT_TURNS_LIMIT_CAP}); fewer come back when their previews would pass the server's budget.",
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
    """Call this FIRST after your context was compacted (or when resuming a session): what was I doing?

    One cheap call returns {handoff, summary, turns, next_cursor}: the session's latest handoff with
    full content (null if none), its miniSummary {summary, summary_source: 'model'|'fallback', ...}
    (null for an empty session; never waits long for a model: 'stale': true means a newer summary is
    being made, summary_error 'model summary pending' means the extractive one stands in), the newest
    turns as short previews (200 chars by default; cut rows carry content_truncated and content_len),
    and next_cursor for query_recent_turns to page back.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    recovery = await state.call(lambda core: core.recover_context(tenant_id, session, viewer=who, turns=turns))
    return state.shaper.recovery(recovery)


@mcp_tool
async def summarize_session(ctx: Ctx, *, session: Session, tenant: Tenant = None) -> dict[str, Any]:
    """Summarize a session in at most 280 chars, stored as an episode (ref 'ep:<id>', recallable).

    Built from the session's shared memories only: private (visibility='agent') ones never enter a
    summary, its covers or its turn_count. Returns {ref, session, summary, summary_source,
    covers: {first, last}, turn_count, updated, cached}. Cached until the session gains shared memories.
    Never fails for a slow or missing model: it falls back to an extractive summary with
    summary_source='fallback' and summary_error giving the reason.
    A session without shared memories fails with NOT_FOUND.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    episode = await state.call(lambda core: core.summarize_session(tenant_id, session))
    return episode.to_dict()
