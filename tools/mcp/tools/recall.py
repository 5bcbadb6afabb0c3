"""The recall tools: hybrid search, returned in the preview tier.

Each tool resolves the tenant, makes one service call and shapes the result with the
``PreviewShaper``; the docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Any

from tools.mcp.context import Ctx, ServerState, mcp_tool, state_of
from tools.mcp.identity import Viewer, viewer_of
from tools.mcp.params import (
    AgentFilter,
    ChannelFilter,
    ContextEntries,
    Deep,
    ExcludeContents,
    FullContent,
    ProjectFilter,
    RecallLimit,
    RecallQuery,
    SessionFilter,
    SourceFilter,
    Tenant,
    TypeFilter,
)


def _capped(limit: int | None, state: ServerState) -> int | None:
    """The limit asked for, within ``server.mcp_limit_cap``; None: ``recall.default_limit``."""
    return None if limit is None else min(limit, state.recall_limit_cap)


@mcp_tool
async def recall(
    ctx: Ctx,
    *,
    tenant: Tenant = None,
    query: RecallQuery = "",
    limit: RecallLimit = None,
    viewer: Viewer = None,
    type: TypeFilter = None,
    session: SessionFilter = None,
    agent: AgentFilter = None,
    channel: ChannelFilter = None,
    source_id: SourceFilter = None,
    project_id: ProjectFilter = None,
    exclude_contents: ExcludeContents = None,
    deep: Deep = False,
    full_content: FullContent = False,
) -> dict[str, Any]:
    """Relevant memories, best first (semantic, keyword and entity search, fused): {messages, shared?}.
    Row: ref, content (at most $preview_chars chars; a cut one adds content_truncated, content_len:
    expand with get_contents or full_content), session, agent, timestamp, confidence, match_reason
    (the signal ranking keyed on, per-branch scores), type unless 'turn'; values every row shares go
    once in shared. gate_fallback=true: only weak matches.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    result = await state.call(
        lambda core: core.recall(
            tenant_id, query, viewer=who, limit=_capped(limit, state), type=type, session=session, agent=agent,
            channel=channel, source_id=source_id, project_id=project_id, exclude_contents=exclude_contents, deep=deep,
        )
    )
    return state.shaper.recall(result, full_content=full_content)


@mcp_tool
async def recall_with_context(
    ctx: Ctx,
    *,
    context: ContextEntries,
    tenant: Tenant = None,
    query: RecallQuery = "",
    limit: RecallLimit = None,
    viewer: Viewer = None,
    type: TypeFilter = None,
    session: SessionFilter = None,
    agent: AgentFilter = None,
    channel: ChannelFilter = None,
    source_id: SourceFilter = None,
    project_id: ProjectFilter = None,
    exclude_contents: ExcludeContents = None,
    deep: Deep = False,
    full_content: FullContent = False,
) -> dict[str, Any]:
    """recall steered by the conversation you pass in context; rows it already holds are skipped.
    Same arguments and rows as recall; the response also echoes context as previews."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    entries = [entry.model_dump() for entry in context]
    result = await state.call(
        lambda core: core.recall_with_context(
            tenant_id, query, entries, viewer=who, limit=_capped(limit, state), type=type, session=session,
            agent=agent, channel=channel, source_id=source_id, project_id=project_id,
            exclude_contents=exclude_contents, deep=deep,
        )
    )
    return state.shaper.recall(result, full_content=full_content, context=entries)
