"""The version tools: update_memory, lock_memory, unlock_memory.

Each tool resolves the tenant and the calling agent, makes one service call and shapes the
result; the docstrings are the descriptions agents read (kept terse: tools/list is in every
agent's context).
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memory_core import InvalidInputError
from tools.mcp.context import Ctx, mcp_tool, state_of
from tools.mcp.identity import Author, Viewer, author_of, own_only, viewer_of
from tools.mcp.params import MemoryRef, Metadata, Salience, Tenant

NewContent = Annotated[str | None, Field()]  # the description says omitted fields are kept
EndReason = Annotated[str | None, Field()]  # the description says what it does (the service caps it)


@mcp_tool
async def update_memory(
    ctx: Ctx,
    *,
    ref: MemoryRef,
    content: NewContent = None,
    metadata: Metadata = None,
    salience: Salience = None,
    agent: Author = None,
    tenant: Tenant = None,
    end: EndReason = None,
    revive: bool | None = None,
) -> dict[str, Any]:
    """Correct a memory: a new version (new ref; omitted fields kept) supersedes ref, kept as
    history. SUPERSEDED: update error.head instead. end: why it is no longer true (no new version);
    revive undoes that."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    author = author_of(state, agent)
    mine = own_only(state)
    if end is not None or revive:
        if (end is not None and revive) or content is not None or metadata is not None or salience is not None:
            raise InvalidInputError("Give end (a reason) or revive alone, without content, metadata or salience.",
                                    field="end" if end is not None else "revive")
        ended = await state.call(
            lambda core: core.end_memory(tenant_id, ref, end, agent=author, own_only=mine) if end is not None
            else core.revive_memory(tenant_id, ref, agent=author, own_only=mine))
        return ended.to_dict()
    result = await state.call(
        lambda core: core.update_memory(tenant_id, ref, content=content, metadata=metadata, salience=salience,
                                        agent=author, own_only=mine)
    )
    return result.to_dict()


async def _set_lock(ctx: Ctx, ref: str, tenant: str | None, viewer: str | None, locked: bool) -> dict[str, Any]:
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    mine = own_only(state)
    changed = await state.call(lambda core: (core.lock_memory if locked else core.unlock_memory)(
        tenant_id, ref, viewer=who, own_only=mine))
    return {"ref": ref, "locked": locked, "changed": bool(changed)}


@mcp_tool
async def lock_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Refuse update and delete of ref (LOCKED) until unlock_memory."""
    return await _set_lock(ctx, ref, tenant, viewer, True)


@mcp_tool
async def unlock_memory(ctx: Ctx, *, ref: MemoryRef, tenant: Tenant = None, viewer: Viewer = None) -> dict[str, Any]:
    """Undo lock_memory."""
    return await _set_lock(ctx, ref, tenant, viewer, False)
