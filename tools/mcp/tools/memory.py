"""The write and lookup tools: add_memory, create_handoff, delete_memory, get_contents,
check_memory and query_recent_turns.

Each tool resolves the tenant, makes one service call and shapes the result; the
docstrings are the descriptions agents read.
"""

from __future__ import annotations

from typing import Any

from tools.mcp.context import Ctx, mcp_tool, state_of
from tools.mcp.identity import Author, Viewer, author_of, own_only, viewer_of
from tools.mcp.params import (
    RECENT_TURNS_LIMIT_DEFAULT,
    AsOfRead,
    Channel,
    Content,
    Cursor,
    Entities,
    IdempotencyKey,
    MemoryRef,
    MemoryType,
    Metadata,
    Project,
    Provenance,
    Refs,
    Relations,
    ReviewAfter,
    Role,
    Salience,
    Session,
    Source,
    Tenant,
    Timestamp,
    TurnsLimit,
    ValidFrom,
    Visibility,
)


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
    valid_from: ValidFrom = None,
    review_after: ReviewAfter = None,
    idempotency_key: IdempotencyKey = None,
    metadata: Metadata = None,
    entities: Entities = None,
    relations: Relations = None,
    provenance: Provenance = None,
) -> dict[str, Any]:
    """Store a memory. A repeated idempotency_key returns the first ref (created=false); the same
    content just before in the session adds duplicate_of. Secrets become [REDACTED:kind]. Junk (ok,
    NO_REPLY, your repeat): stored=false, reason.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    author = author_of(state, agent)
    result = await state.call_add(
        lambda core: core.add_memory(
            tenant_id, session, author, content, type=type, role=role, channel=channel, source=source,
            project_id=project_id, salience=salience, visibility=visibility, timestamp=timestamp,
            valid_from=valid_from, review_after=review_after, idempotency_key=idempotency_key, metadata=metadata,
            entities=entities, relations=relations,
            provenance=provenance,
        )
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
    visibility: Visibility = "tenant",
) -> dict[str, Any]:
    """Write a handoff (done, in progress, next) before a compaction or session end; recover_context
    returns it first. Salience 0.95, else as add_memory.
    """
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    author = author_of(state, agent)
    result = await state.call(
        lambda core: core.create_handoff(
            tenant_id, session, author, content, project_id=project_id, idempotency_key=idempotency_key,
            visibility=visibility,
        )
    )
    return state.shaper.added(result)


@mcp_tool
async def delete_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Delete a memory for good; deleted=false if not found or another agent's private memory."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    mine = own_only(state)
    deleted = await state.call(lambda core: core.delete_memory(tenant_id, ref, viewer=who, own_only=mine))
    return {"ref": ref, "deleted": bool(deleted)}


@mcp_tool
async def get_contents(ctx: Ctx, *, refs: Refs, tenant: Tenant = None, viewer: Viewer = None,
                       as_of: AsOfRead = None) -> dict[str, Any]:
    """Full rows for up to $refs_cap refs; missing: malformed, deleted or hidden ones; requested: the
    ref you sent, when not the row's."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    contents = await state.call(lambda core: core.get_contents(tenant_id, refs, viewer=who, as_of=as_of))
    return state.shaper.contents(contents)


@mcp_tool
async def check_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None,
                       as_of: AsOfRead = None) -> dict[str, Any]:
    """One memory in full with its neighbours: author, session, previous and next (previews), edges,
    versions. Unknown ref: NOT_FOUND."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    result = await state.call(lambda core: core.check_memory(tenant_id, ref, viewer=who, as_of=as_of))
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
    """A session's turns, newest first, as previews; pass next_cursor back for older ones (null: no
    more)."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    page = await state.call(lambda core: core.query_recent_turns(tenant_id, session, limit, cursor, viewer=who))
    return state.shaper.recent_turns(page)
