"""The recall tools: hybrid search, returned in the preview tier.

Each tool resolves the tenant, makes one service call and shapes the result with the
``PreviewShaper``; the docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Any

from tools.mcp_context import Ctx, mcp_tool, state_of
from tools.mcp_identity import Viewer, viewer_of
from tools.mcp_params import (
    RECALL_LIMIT_DEFAULT,
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


def _filters(
    *,
    type: str | None,
    session: str | None,
    agent: str | None,
    channel: str | None,
    source_id: str | None,
    project_id: str | None,
    exclude_contents: list[str] | None,
    deep: bool,
) -> dict[str, Any]:
    """Keyword arguments for ``MemoryCore.recall``; an omitted project_id stays unset (all projects)."""
    kwargs: dict[str, Any] = {
        "type": type,
        "session": session,
        "agent": agent,
        "channel": channel,
        "source_id": source_id,
        "exclude_contents": exclude_contents,
        "deep": deep,
    }
    if project_id is not None:
        kwargs["project_id"] = project_id
    return kwargs


@mcp_tool
async def recall(
    ctx: Ctx,
    *,
    tenant: Tenant = None,
    query: RecallQuery = "",
    limit: RecallLimit = RECALL_LIMIT_DEFAULT,
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
    """Find relevant memories (vector + lexical + keyword search, fused and scored), best first.

    Returns {messages: [...]} where each message has ref, content, type, session, agent, timestamp,
    source, confidence and, when scored, match_reason {signal, score, ...}. content is a preview: a pure
    prefix (500 chars by default); only cut rows carry content_truncated=true and content_len (the full
    length). Expand chosen rows with get_contents(refs), or pass full_content=true. gate_fallback=true
    (absent otherwise) means nothing passed the quality gate and weak lexical matches were returned:
    treat them as low-confidence. Filtering by type favours the newest (e.g. type='handoff').
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    filters = _filters(
        type=type,
        session=session,
        agent=agent,
        channel=channel,
        source_id=source_id,
        project_id=project_id,
        exclude_contents=exclude_contents,
        deep=deep,
    )
    result = await state.call(
        lambda core: core.recall(tenant_id, query, viewer=who, limit=min(limit, state.recall_limit_cap), **filters)
    )
    return state.shaper.recall(result, full_content=full_content)


@mcp_tool
async def recall_with_context(
    ctx: Ctx,
    *,
    context: ContextEntries,
    tenant: Tenant = None,
    query: RecallQuery = "",
    limit: RecallLimit = RECALL_LIMIT_DEFAULT,
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
    """Like recall, steered by the recent conversation you pass in context; results skip what it holds.

    Same filters, response and preview tier as recall. The response also echoes context (role and
    content, trimmed the same way, without refs) so you can see what was matched against.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    entries = [entry.model_dump() for entry in context]
    filters = _filters(
        type=type,
        session=session,
        agent=agent,
        channel=channel,
        source_id=source_id,
        project_id=project_id,
        exclude_contents=exclude_contents,
        deep=deep,
    )
    result = await state.call(
        lambda core: core.recall_with_context(
            tenant_id, query, entries, viewer=who, limit=min(limit, state.recall_limit_cap), **filters
        )
    )
    return state.shaper.recall(result, full_content=full_content, context=entries)
