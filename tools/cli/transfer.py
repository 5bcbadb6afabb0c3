"""export / import: one tenant as JSONL, with a Rich progress bar on the terminal."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from memory_core.errors import NotFoundError
from tools.cli import render
from tools.cli.common import EXIT_PROBLEMS, Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, tenant_of

if TYPE_CHECKING:
    from rich.progress import Progress


def _progress(quiet: bool) -> Progress:
    """A progress bar on stderr, shown only on a terminal (never in --json mode)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = render.err_console()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=quiet or not out.is_terminal,
    )


def export(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write to FILE (default: standard output).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Export one tenant as JSONL: one memory per line with every field needed to rebuild it.

    Lines hold ref, tenant, session, agent, type, role, channel, source, project_id, salience,
    visibility, timestamp, metadata, content, idempotency_key, content_hash and edges, and for
    corrected or locked memories supersedes, superseded, valid_to and locked. An export
    never contains another tenant's rows; private memories are included (operator backup).

    Example: memory-core export --tenant acme --out acme.jsonl

    JSON (with --out): {"tenant", "exported", "out"}; without --out the JSONL goes to stdout.
    """
    from memory_core.operator.transfer import export_count, export_tenant  # loads with the command, not with --help

    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        total = export_count(core, tenant_of(tenant))
        with _progress(opts.json or out is None) as bar, _sink(out) as fh:
            task = bar.add_task(f"export {tenant}", total=total)
            exported = 0
            for line in export_tenant(core, tenant_of(tenant)):
                fh.write(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
                exported += 1
                bar.advance(task)
    if out is None:
        return
    if opts.json:
        render.emit_json({"tenant": tenant, "exported": exported, "out": str(out)})
    else:
        typer.echo(f"Exported {exported} memories of {tenant} to {out}.")


@contextlib.contextmanager
def _sink(out: Path | None) -> Iterator[IO[str]]:
    """stdout, or FILE written via FILE.partial so a failed export leaves no half file."""
    if out is None:
        yield sys.stdout
        sys.stdout.flush()
        return
    partial = out.with_name(out.name + ".partial")
    with partial.open("w", encoding="utf-8") as fh:
        yield fh
    os.replace(partial, out)


def import_(
    ctx: typer.Context,
    file: Annotated[str, typer.Argument(help="A JSONL export; '-' reads standard input.")],
    tenant: TenantOpt = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Import a JSONL export into --tenant (lines of other tenants are refused). Idempotent.

    Memories keep their refs when the id is free; a memory already present (same session,
    timestamp and content) is skipped, so re-importing a file writes nothing new. Exit 1
    when some lines were refused (they are listed).

    Example: memory-core import acme.jsonl --tenant acme

    JSON: {"lines", "written", "skipped", "remapped", "edges", "states", "errors",
    "error_lines": [{line, code, message}]} (states: rows whose version or lock state was set)
    """
    from memory_core.operator.transfer import import_lines  # loads with the command, not with --help

    opts = Common.of(ctx, config, data_dir, json_out)
    total = None if file == "-" else _count_lines(Path(file))
    with _source(file) as lines, opts.core() as core, _progress(opts.json) as bar:
        task = bar.add_task(f"import {tenant}", total=total)
        counts = import_lines(core, lines, tenant_of(tenant), lambda n: bar.advance(task, n))
    if opts.json:
        render.emit_json(counts.to_dict())
    else:
        typer.echo(
            f"Imported into {tenant}: {counts.written} written ({counts.remapped} under new refs), "
            f"{counts.skipped} already present, {counts.edges} edges, {counts.errors} refused."
        )
        if counts.error_lines:
            render.table(
                "refused lines",
                ["line", "code", "message"],
                ([e["line"], e["code"], e["message"]] for e in counts.error_lines),
            )
    if counts.errors:
        raise typer.Exit(EXIT_PROBLEMS)


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return None  # reported when the file is opened


@contextlib.contextmanager
def _source(file: str) -> Iterator[Iterator[str]]:
    if file == "-":
        yield iter(sys.stdin)
        return
    path = Path(file)
    if not path.is_file():
        raise NotFoundError(f"There is no file {file} to import.", path=file)
    with path.open(encoding="utf-8") as fh:
        yield iter(fh)


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command(name="import")(import_)
