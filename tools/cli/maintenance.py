"""Maintenance commands: doctor (operator-wide check and repair) and init (write a config file)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_core import InvalidInputError, StoreError, template_text
from tools.cli import render
from tools.cli.common import EXIT_PROBLEMS, Common, ConfigOpt, DataDirOpt, JsonOpt

if TYPE_CHECKING:
    from memory_core.operator import DoctorReport

DEFAULT_CONFIG = Path("memory-core.toml")


def doctor(
    ctx: typer.Context,
    repair: Annotated[bool, typer.Option("--repair", help="Fix what can be fixed without losing data.")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Check that Chroma, the lexical index and the graph agree. Operator-wide by design: every tenant.

    Reports counts per tenant and store, orphans on either side, stale lexical rows, dangling
    edges and journal entries left by a crash (entries found at open are recovered then and
    listed). --repair restores or re-embeds from the surviving store, rebuilds a tenant's
    lexical index, deletes dangling edges, and saves anything it cannot restore to
    <data-dir>/doctor/quarantine-*.jsonl before removing it. Exit 1 while problems remain.

    Example: memory-core doctor --repair --data-dir /var/lib/memory-core

    JSON: {"ok", "counts": […], "findings": [{kind, tenant, ref, detail}], "recovered_at_open": […],
    and with --repair "repairs": [{kind, tenant, ref, action}], "remaining": […]}
    """
    from memory_core.operator import check_stores, repair_stores  # loads with the command, not with --help

    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.parts() as parts:
        report = repair_stores(parts) if repair else check_stores(parts)
    if opts.json:
        render.emit_json(report.to_dict())
    else:
        _print_report(report)
    if not report.ok:
        raise typer.Exit(EXIT_PROBLEMS)


def _print_report(report: DoctorReport) -> None:
    render.table(
        "stores (all tenants)",
        ["tenant", "rows", "counted", "vectors", "lexical"],
        ([c.tenant, c.rows, c.counted, c.vectors, c.lexical] for c in report.counts),
    )
    if report.recovered_at_open:
        render.table(
            "recovered at open",
            ["op", "tenant", "ref", "action"],
            ([r["op"], r["tenant"], r["ref"], r["action"]] for r in report.recovered_at_open),
        )
    if report.findings:
        render.table(
            "findings",
            ["kind", "tenant", "ref", "detail"],
            ([f.kind, f.tenant, f.ref, f.detail] for f in report.findings),
        )
    if report.remaining is not None:
        render.table(
            "repairs",
            ["kind", "tenant", "ref", "action"],
            ([r.kind, r.tenant, r.ref, r.action] for r in report.repairs),
        )
        if report.remaining:
            render.table(
                "remaining",
                ["kind", "tenant", "ref", "detail"],
                ([f.kind, f.tenant, f.ref, f.detail] for f in report.remaining),
            )
    if report.ok:
        typer.echo("All stores agree.")
    elif report.remaining is None:
        typer.echo(f"{len(report.findings)} problem(s) found; `memory-core doctor --repair` fixes what it can.")
    else:
        typer.echo(f"{len(report.remaining)} problem(s) remain after repair.")


def init(
    ctx: typer.Context,
    config: Annotated[Path, typer.Option("--config", "-c", help="Where to write the config file.")] = DEFAULT_CONFIG,
    data_dir: DataDirOpt = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Write a commented config file listing every setting with its default.

    --data-dir sets storage.data_dir in the written file. Use it with --config or MEMORY_CORE_CONFIG.

    Example: memory-core init --config ./memory-core.toml --data-dir /var/lib/memory-core

    JSON: {"written": path}
    """
    opts = Common.of(ctx, None, data_dir, json_out)
    if config.exists() and not force:
        raise InvalidInputError(f"{config} already exists; pass --force to overwrite it.", path=str(config))
    text = template_text()
    if data_dir is not None:
        value = json.dumps(str(data_dir))  # a JSON string is a valid TOML basic string
        text = re.sub(r'^data_dir = "[^"]*"', lambda _m: f"data_dir = {value}", text, count=1, flags=re.M)
    try:
        config.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise StoreError(f"Cannot write {config}: {exc.strerror}.", path=str(config)) from exc
    if opts.json:
        render.emit_json({"written": str(config)})
    else:
        typer.echo(f"Wrote {config}. Use it with: memory-core <command> --config {config}")


def register(app: typer.Typer) -> None:
    app.command()(doctor)
    app.command()(init)
