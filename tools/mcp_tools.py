"""The write and lookup tools: add_memory, create_handoff, delete_memory, get_contents,
check_memory and query_recent_turns.

Each tool resolves the tenant, makes one service call and shapes the result; the
docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Any

from tools.mcp_context import Ctx, mcp_tool, state_of
from tools.mcp_identity import Author, Viewer, author_of, viewer_of
from tools.mcp_params import (
    RECENT_TURNS_LIMIT_DEFAULT,
    Channel,
    Content,
    Cursor,
    IdempotencyKey,
    MemoryRef,
    MemoryType,
    Metadata,
    Project,
    Refs,
    Role,
    Salience,
    Session,
    Source,
    Tenant,
    Timestamp,
    TurnsLimit,
    Visibility,
)


def _given(**fields: Any) -> dict[str, Any]:
    """Only the optional arguments the caller actually set, so the service's defaults apply."""
    return {key: value for key, value in fields.items() if value is not None}


@mcp_tool
async def add_memory(
    ctx: Ctx,
    *,
    session: Session,
    content: Content,
    agent: Author = None,
    tenant: Tenant = None,
    type: MemoryType = "turn",
    role: Role = None,
    channel: Channel = None,
    source: Source = None,
    project_id: Project = None,
    salience: Salience = None,
    visibility: Visibility = "tenant",
    timestamp: Timestamp = None,
    idempotency_key: IdempotencyKey = None,
    metadata: Metadata = None,
) -> dict[str, Any]:
    """Store one memory (a turn, note, decision, error, ...) and return its ref.

    Returns {ref, timestamp, created}. With idempotency_key, a retry returns the first call's ref and
    created=false, so a timed-out call can simply be repeated (keys of visibility='agent' memories are
    their author's own; shared keys are the tenant's). Identical content in the same session within a
    short window is stored but reported as duplicate_of=<ref> (only a memory you can read).
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    author = author_of(state, agent)
    optional = _given(
        role=role,
        channel=channel,
        source=source,
        project_id=project_id,
        salience=salience,
        timestamp=timestamp,
        idempotency_key=idempotency_key,
        metadata=metadata,
    )
    result = await state.call(
        lambda core: core.add_memory(tenant_id, session, author, content, type=type, visibility=visibility, **optional)
    )
    return state.shaper.added(result)


@mcp_tool
async def create_handoff(
    ctx: Ctx,
    *,
    session: Session,
    content: Content,
    agent: Author = None,
    tenant: Tenant = None,
    project_id: Project = None,
    idempotency_key: IdempotencyKey = None,
) -> dict[str, Any]:
    """Write a handoff: what you were doing, what is done, what comes next, for whoever resumes.

    Stored with type='handoff' and salience 0.95, linked to the session's previous handoff. Write one
    before your context is compacted or your session ends; recall with type='handoff' returns the
    newest first. Returns {ref, timestamp, created}.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    author = author_of(state, agent)
    optional = _given(project_id=project_id, idempotency_key=idempotency_key)
    result = await state.call(lambda core: core.create_handoff(tenant_id, session, author, content, **optional))
    return state.shaper.added(result)


@mcp_tool
async def delete_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Delete one memory from both stores, permanently. Returns {ref, deleted}; deleted=false when the
    ref does not exist in this tenant or is another agent's private memory (only its author deletes it)."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    deleted = await state.call(lambda core: core.delete_memory(tenant_id, ref, viewer=who))
    return {"ref": ref, "deleted": bool(deleted)}


@mcp_tool
async def get_contents(ctx: Ctx, *, refs: Refs, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Expand up to 20 refs (from recall previews) to their full rows.

    Returns {found: [full rows], missing: [refs]}. Refs that are malformed, deleted or not visible to
    you land in missing; one bad ref never fails the batch. Every ref you send is answered once per
    time you sent it, under your exact string: a found row (with requested=<your string> when that
    differs from the row's ref, e.g. ' mem:6') or an entry of missing.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    contents = await state.call(lambda core: core.get_contents(tenant_id, refs, viewer=who))
    return state.shaper.contents(contents)


@mcp_tool
async def check_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Inspect one memory: its full content and its graph neighbours.

    Returns {memory: full row, neighbours: {author, session, previous, next, edges}}; the previous and
    next rows of the session are previews. An unknown ref fails with NOT_FOUND.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    result = await state.call(lambda core: core.check_memory(tenant_id, ref, viewer=who))
    return state.shaper.check(result)


@mcp_tool
async def query_recent_turns(
    ctx: Ctx,
    *,
    session: Session,
    tenant: Tenant = None,
    limit: TurnsLimit = RECENT_TURNS_LIMIT_DEFAULT,
    cursor: Cursor = None,
    viewer: Viewer = None,
) -> dict[str, Any]:
    """Page through a session's turns, newest first.

    Returns {turns: [...], next_cursor}; pass next_cursor back to get the next (older) page, null
    means no more. Pages never skip or repeat a turn, even while new turns arrive. Turn content is a
    preview (500 chars by default; cut rows carry content_truncated and content_len).
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    page = await state.call(lambda core: core.query_recent_turns(tenant_id, session, limit, cursor, viewer=who))
    return state.shaper.recent_turns(page)
