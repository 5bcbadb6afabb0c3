"""entities: list a tenant's entities (names, kinds, aliases, mention counts) and merge two of them."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from tools.cli import render
from tools.cli.common import Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, ViewerOpt, tenant_of

entities_app = typer.Typer(name="entities", invoke_without_command=True, no_args_is_help=False)


def _entity(e: Any) -> dict[str, Any]:
    return {"ref": e.ref, "name": e.name, "kind": e.kind, "aliases": list(e.aliases), "mentions": e.mentions}


@entities_app.callback()
def entities(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    viewer: ViewerOpt = None,
    kind: Annotated[str | None, typer.Option(help="Only entities of this kind (person, service, ...).")] = None,
    limit: Annotated[int | None, typer.Option("--limit", "-n", help="At most this many (1-1000; default 100).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the tenant's entities, most mentioned first (or: entities merge KEEP OTHER).

    Without --viewer: those shared memories mention; with it, also those only that agent's
    private memories mention.

    Example: memory-core entities --tenant acme --json

    JSON: {"tenant", "entities": [{ref, name, kind, aliases, mentions}, …]}
    """
    if ctx.invoked_subcommand is not None:
        return
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        found = core.list_entities(tenant_of(tenant), viewer=viewer, kind=kind, limit=limit)
    if opts.json:
        render.emit_json({"tenant": tenant, "entities": [_entity(e) for e in found]})
        return
    render.table(f"{tenant}: {len(found)} entities", ["ref", "name", "kind", "aliases", "mentions"],
                 [[e.ref, e.name, e.kind or "", ", ".join(a for a in e.aliases if a != e.name), e.mentions]
                  for e in found])


@entities_app.command()
def merge(
    ctx: typer.Context,
    keep: Annotated[str, typer.Argument(help="The entity that stays: its ref (ent:12) or any name or alias.")],
    other: Annotated[str, typer.Argument(help="The entity folded into it (its ref is gone after).")],
    tenant: TenantOpt = None,
    viewer: ViewerOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Merge OTHER into KEEP: aliases, mentions and relations move; one transaction.

    Example: memory-core entities merge --tenant acme "Payments API" payments-svc

    JSON: {"kept": {ref, name, kind, aliases}, "merged": ref}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.merge_entities(tenant_of(tenant), keep, other, viewer=viewer)
    kept = result.kept
    if opts.json:
        render.emit_json({"kept": {"ref": f"ent:{kept.id}", "name": kept.name, "kind": kept.kind,
                                   "aliases": list(kept.aliases)}, "merged": result.merged_ref})
    else:
        typer.echo(f"Merged {result.merged_ref} into ent:{kept.id} ({kept.name}); aliases: {', '.join(kept.aliases)}.")


def register(app: typer.Typer) -> None:
    app.add_typer(entities_app)
