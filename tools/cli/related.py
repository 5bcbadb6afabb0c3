"""related: the entity graph around an entity or a memory (one call of ``MemoryCore.related``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from tools.cli import render
from tools.cli.common import AsOfOpt, Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, ViewerOpt, tenant_of

if TYPE_CHECKING:  # `memory-core --help` loads no store, graph or pydantic module
    from memory_core import RelatedItem

MAX_DEPTH = 3  # = memory_core.entities.related.MAX_DEPTH / MAX_LIMIT (tests/tools/cli/test_cli_related.py checks)
MAX_LIMIT = 100


def _item(item: RelatedItem) -> dict[str, Any]:
    from memory_core import entity_dict

    out: dict[str, Any] = {"ref": item.ref, "kind": item.kind, "score": item.score, "depth": item.depth,
                           "path": [step.to_dict() for step in item.path]}
    if item.memory is not None:
        out["memory"] = item.memory.to_dict()
    elif item.entity is not None:
        out["entity"] = entity_dict(item.entity)
    return out


def related(
    ctx: typer.Context,
    entity: Annotated[str, typer.Argument(help="An entity name or alias, an ent: ref or a mem: ref.")],
    tenant: TenantOpt = None,
    depth: Annotated[int, typer.Option(help=f"Edges to walk (1-{MAX_DEPTH}).")] = 2,
    limit: Annotated[int, typer.Option("--limit", "-n", help=f"At most this many items (1-{MAX_LIMIT}).")] = 20,
    viewer: ViewerOpt = None,
    as_of: AsOfOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Memories and entities linked to ENTITY through the entities memories mention, best first.

    Example: memory-core related "payments-api" --tenant acme --depth 2

    JSON: {"start": {ref, name?}, "items": [{ref, kind, score, depth, path: [{ref, via?, name?}, …],
    memory | entity}, …], "truncated"?: true}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.related(tenant_of(tenant), entity, depth=depth, limit=limit, viewer=viewer, as_of=as_of)
    if opts.json:
        out: dict[str, Any] = {"start": result.start.to_dict(), "items": [_item(i) for i in result.items]}
        if result.truncated:
            out["truncated"] = True
        render.emit_json(out)
        return
    rows = []
    for i in result.items:
        what = render.preview(i.memory.content) if i.memory is not None else (i.entity.name if i.entity else "")
        via = " → ".join(f"{s.via} {s.name or s.ref}" for s in i.path[1:])
        rows.append([i.ref, i.kind, f"{i.score:.3f}", i.depth, what, via])
    render.table(f"related to {result.start.name or result.start.ref}", ["ref", "kind", "score", "depth", "what",
                                                                        "path"], rows)


def register(app: typer.Typer) -> None:
    app.command()(related)
