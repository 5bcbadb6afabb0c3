"""Version commands: history, update, lock, unlock — each one call of the service, as the operator
(private memories included; see :mod:`memory_core.versions.service` for the rules)."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_core import MemoryRow
from tools.cli import render
from tools.cli.common import (
    Common,
    ConfigOpt,
    DataDirOpt,
    JsonOpt,
    TenantOpt,
    parse_json_object,
    read_text_argument,
    tenant_of,
)

RefArg = Annotated[str, typer.Argument(help="A memory ref, e.g. mem:42.")]


def history(
    ctx: typer.Context,
    ref: RefArg,
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show every version of a memory's chain, oldest first (any version's ref will do).

    Example: memory-core history mem:42 --tenant acme

    JSON: {"ref", "versions": [row, …]} (a superseded row carries "superseded": true and "valid_to")
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        rows = core.history_as_operator(tenant_of(tenant), ref)
    if opts.json:
        render.emit_json({"ref": ref, "versions": [r.to_dict() for r in rows]})
        return
    render.table(f"{ref}: {len(rows)} version(s), oldest first", ["ref", "timestamp", "valid to", "agent", "content"],
                 [_version_cells(r) for r in rows])


def _version_cells(row: MemoryRow) -> list[str]:
    d = row.to_dict()
    state = d.get("valid_to") or ("current, locked" if row.locked else "current")
    return [row.ref, d["timestamp"], state, row.agent, render.preview(row.content)]


def update(
    ctx: typer.Context,
    ref: RefArg,
    content: Annotated[str | None, typer.Argument(help="The new text; '-' reads it from standard input; "
                                                  "omitted: kept.")] = None,
    tenant: TenantOpt = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Author of the new version "
                                              "(default: the old one's).")] = None,
    salience: Annotated[float | None, typer.Option(help="0..1 (omitted: kept).")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object that replaces the old one.")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Correct a memory: write a new version that supersedes REF (kept as history, marked superseded).

    Refused for an older version (SUPERSEDED: update the newest) or a locked memory (LOCKED).

    Example: memory-core update mem:42 "The deploy target is staging-4" --tenant acme

    JSON: {"ref", "timestamp", "created", "supersedes", "redacted"?: {kind: count}}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    text = read_text_argument(content) if content is not None else None
    fields = parse_json_object(metadata, "metadata")
    with opts.core() as core:
        result = core.update_memory_as_operator(tenant_of(tenant), ref, content=text, metadata=fields,
                                                salience=salience, agent=agent)
    if opts.json:
        render.emit_json(result.to_dict())
        return
    typer.echo(f"Stored {result.added.ref}, which supersedes {result.supersedes}."
               f"{render.redacted_note(result.added.redacted)}")


def _set_lock(ctx: typer.Context, ref: str, tenant: str | None, locked: bool, common: Common) -> None:
    with common.core() as core:
        changed = core.set_lock_as_operator(tenant_of(tenant), ref, locked)
    if common.json:
        render.emit_json({"ref": ref, "locked": locked, "changed": changed})
        return
    word = "Locked" if locked else "Unlocked"
    typer.echo(f"{word} {ref}." if changed else f"{ref} was already {word.lower()}.")


def lock(
    ctx: typer.Context,
    ref: RefArg,
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Lock a memory: update and delete are refused (LOCKED) until it is unlocked.

    Example: memory-core lock mem:42 --tenant acme

    JSON: {"ref", "locked": true, "changed"}
    """
    _set_lock(ctx, ref, tenant, True, Common.of(ctx, config, data_dir, json_out))


def unlock(
    ctx: typer.Context,
    ref: RefArg,
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Unlock a memory locked with lock (or lock_memory).

    Example: memory-core unlock mem:42 --tenant acme

    JSON: {"ref", "locked": false, "changed"}
    """
    _set_lock(ctx, ref, tenant, False, Common.of(ctx, config, data_dir, json_out))


def register(app: typer.Typer) -> None:
    for fn in (history, update, lock, unlock):
        app.command()(fn)
