"""The ``related`` tool: the entity graph around an entity or a memory, in the preview tier."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from memory_core import RELATED_MAX_DEPTH, RelatedItem, RelatedResult, entity_dict
from tools.mcp.context import Ctx, mcp_tool, state_of
from tools.mcp.identity import Viewer, viewer_of
from tools.mcp.params import AsOfRead, Tenant
from tools.mcp.preview import PreviewShaper

RELATED_LIMIT_CAP = 50
RELATED_LIMIT_DEFAULT = 10

EntityOrRef = Annotated[str, Field()]
Depth = Annotated[int, Field(ge=1, le=RELATED_MAX_DEPTH)]
RelatedLimit = Annotated[int, Field(ge=1, le=RELATED_LIMIT_CAP)]


@mcp_tool
async def related(
    ctx: Ctx,
    *,
    entity: EntityOrRef,
    tenant: Tenant = None,
    depth: Depth = 2,
    limit: RelatedLimit = RELATED_LIMIT_DEFAULT,
    viewer: Viewer = None,
    as_of: AsOfRead = None,
) -> dict[str, Any]:
    """Memories and entities an entity (name, alias, ent:N) or a memory (mem:N) links to by mentions and
    relations, best first, with their paths."""
    state = state_of(ctx)
    tenant_id = state.scope.resolve(tenant)
    who = viewer_of(state, viewer)
    result = await state.call(lambda core: core.related(tenant_id, entity, depth=depth, limit=limit, viewer=who,
                                                          as_of=as_of))
    return shape_related(result, state.shaper)


def shape_related(result: RelatedResult, shaper: PreviewShaper) -> dict[str, Any]:
    """``{start, items[, truncated]}``; an item's path leaves out the start (stated once)."""
    out: dict[str, Any] = {"start": result.start.to_dict(), "items": [_item(i, shaper) for i in result.items]}
    if result.truncated:
        out["truncated"] = True
    return out


def _item(item: RelatedItem, shaper: PreviewShaper) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if item.memory is not None:
        body = shaper.preview_row(item.memory)
    elif item.entity is not None:
        body = {k: v for k, v in entity_dict(item.entity).items() if v not in (None, [])}
    body.update(kind=item.kind, score=item.score, depth=item.depth, via=item.path[-1].via)
    if len(item.path) > 2:  # the nodes between the start and the item
        body["path"] = [step.to_dict() for step in item.path[1:-1]]
    return body
