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

    Each version shows its validity (from, to) and what ended it: the correction that superseded it,
    an end with its reason and who ended it, or "current".

    JSON: {"ref", "versions": [row, …]} (a superseded row carries "superseded": true and "valid_to"; an
    ended one "valid_to" and "ended": {"reason", "by"}; each row "ended_by": what ended it, or null)
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        rows = core.history_as_operator(tenant_of(tenant), ref)
    lives = [version_life(row, rows[k + 1] if k + 1 < len(rows) else None) for k, row in enumerate(rows)]
    if opts.json:
        render.emit_json({"ref": ref, "versions": [{**r.to_dict(), "ended_by": life}
                                                   for r, life in zip(rows, lives, strict=True)]})
        return
    render.table(f"{ref}: {len(rows)} version(s), oldest first",
                 ["ref", "valid from", "valid to", "ended by", "agent", "content"],
                 [_version_cells(r, life) for r, life in zip(rows, lives, strict=True)])


def version_life(row: MemoryRow, newer: MemoryRow | None) -> str | None:
    """What ended a version: the correction that superseded it, an end (reason, who), or None (current)."""
    if row.ended is not None:
        by = row.ended.get("by")
        return f"ended: {row.ended.get('reason')}" + (f" (by {by})" if by else "")
    if row.valid_to is not None:
        return f"corrected by {newer.ref} ({newer.agent})" if newer is not None else "corrected"
    return None


def _version_cells(row: MemoryRow, life: str | None) -> list[str]:
    d = row.to_dict()
    state = d.get("valid_to") or ("current, locked" if row.locked else "current")
    return [row.ref, d.get("valid_from", d["timestamp"]), state, life or "", row.agent, render.preview(row.content)]


def end(
    ctx: typer.Context,
    ref: RefArg,
    reason: Annotated[str, typer.Argument(help="Why it is no longer true (kept in its history).")],
    tenant: TenantOpt = None,
    agent: Annotated[str | None, typer.Option("--agent", "-a", help="Who ends it (kept with the reason).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """End a fact without a replacement (wrong, or no longer true): recall leaves it out, --as-of before
    now still reads it, history shows why; revive undoes it.

    Refused for an older version (SUPERSEDED) or a locked memory (LOCKED).

    Example: memory-core end mem:42 "the freeze was lifted" --tenant acme --agent ops

    JSON: {"ref", "changed", "valid_to", "reason"}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.end_memory_as_operator(tenant_of(tenant), ref, reason, agent=agent)
    if opts.json:
        render.emit_json(result.to_dict())
        return
    typer.echo(f"Ended {result.ref} at {result.valid_to}." if result.changed
               else f"{result.ref} was already ended ({result.reason}).")


def revive(
    ctx: typer.Context,
    ref: RefArg,
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Undo end: the fact is valid again.

    Example: memory-core revive mem:42 --tenant acme

    JSON: {"ref", "changed", "valid_to": null}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        result = core.revive_memory_as_operator(tenant_of(tenant), ref)
    if opts.json:
        render.emit_json(result.to_dict())
        return
    typer.echo(f"Revived {result.ref}." if result.changed else f"{result.ref} was not ended.")


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
    for fn in (history, update, end, revive, lock, unlock):
        app.command()(fn)
