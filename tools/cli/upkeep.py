"""Upkeep commands: consolidate near-duplicates (and undo a merge), retention (plan, apply, restore), reembed
with another model; a progress bar on long runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tools.cli import render
from tools.cli.common import Common, ConfigOpt, DataDirOpt, JsonOpt, tenant_of

if TYPE_CHECKING:
    from memory_core.operator import ConsolidationReport, RetentionReport

TenantOpt = Annotated[str | None, typer.Option("--tenant", help="Only this tenant (default: every tenant).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Write nothing; list what would merge.")]


@contextmanager
def _bar(quiet: bool) -> Iterator[Callable[[str, int, int], None]]:
    """A progress callback (what, done, total) drawing one bar per step on a terminal."""
    with render.progress(quiet) as bar:
        tasks: dict[str, object] = {}

        def update(what: str, done: int, total: int) -> None:
            if what not in tasks:
                tasks[what] = bar.add_task(what, total=total)
            bar.update(tasks[what], completed=done, total=total)  # type: ignore[arg-type]

        yield update


def consolidate(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    dry_run: DryRunOpt = False,
    undo: Annotated[str | None, typer.Option("--undo", metavar="REF",
                                             help="Reverse the merge that wrote REF (needs --tenant).")] = None,
    model_canonical: Annotated[bool, typer.Option(
        "--model-canonical", help="Have [model_provider]'s model write each canonical's text (fail-soft; as "
                                  "consolidation.model_canonical).")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Merge near-duplicate memories into one canonical version each; LLM-free, reversible, safe to rerun.

    Rows merge only inside one tenant and one visibility (a private row only with its own author's
    rows), of one type and project, when they are near in meaning (the cosine of their vectors, at least
    consolidation.min_cosine) and in words (Jaccard at least consolidation.min_overlap, the same numbers
    and negations). The canonical is a new version that supersedes every member (check_memory and
    history show them; recall shows the canonical) and keeps them as provenance in its metadata
    ("consolidated": merged refs, and "also": ref, timestamp, agent, session of each other member).
    --undo REF makes the members current again and ends the canonical; they are never merged again.
    --model-canonical (or consolidation.model_canonical) has the configured model write the canonical's text
    from the members'; an answer that fails, times out, or drops a number or negation keeps the LLM-free text,
    and the canonical's metadata says which ("text": {"by": "model"} or {"by": "member", "fallback": why}).

    Example: memory-core consolidate --tenant acme --dry-run

    JSON: {"dry_run", "scanned": {tenant: rows compared}, "rows_retired", "merges": [{tenant, kept, merged,
    content, canonical, text (with a model)}], "skipped": [{…, reason}]}; with --undo: {"canonical", "restored":
    [refs]}
    """
    from memory_core.operator import consolidate as run  # loads with the command, not with --help
    from memory_core.operator import undo_merge

    opts = Common.of(ctx, config, data_dir, json_out)
    if undo is not None:
        name = tenant_of(tenant)
        with opts.parts() as parts:
            result = undo_merge(parts, name, undo)
        if opts.json:
            render.emit_json(result.to_dict())
        else:
            typer.echo(f"Undid {result.canonical}: {len(result.restored)} memories current again "
                       f"({', '.join(result.restored)}).")
        return
    with opts.parts() as parts, _bar(opts.json) as progress:
        rewrite = None
        if model_canonical or parts.settings.consolidation.model_canonical:
            from memory_core.operator import ModelCanonical

            rewrite = ModelCanonical.from_settings(parts.settings).rewrite
        report = run(parts, None if tenant is None else [tenant_of(tenant)], dry_run=dry_run, progress=progress,
                     rewrite=rewrite)
    if opts.json:
        render.emit_json(report.to_dict())
    else:
        _print_report(report)


def _print_report(report: ConsolidationReport) -> None:
    verb = "would merge" if report.dry_run else "merged"
    render.table(
        f"consolidation ({'dry run' if report.dry_run else 'applied'})",
        ["tenant", "canonical", "kept", "merged", "content"],
        ([m.tenant, ref or "-", m.to_dict()["kept"], ", ".join(m.to_dict()["merged"]), render.preview(m.content)]
         for m, ref in report.merges),
    )
    if report.skipped:
        render.table("skipped (changed meanwhile)", ["tenant", "kept", "reason"],
                     ([m.tenant, m.to_dict()["kept"], why] for m, why in report.skipped))
    scanned = sum(report.scanned.values())
    typer.echo(f"{len(report.merges)} clusters {verb}: {report.rows_retired} of {scanned} current memories "
               f"{'would be' if report.dry_run else 'are'} superseded by a canonical version.")


retention_app = typer.Typer(name="retention", no_args_is_help=True,
                            help="Archive old rows by type (retention.archive_after_days), and restore them.")


@retention_app.command("plan")
def retention_plan(
    ctx: typer.Context, tenant: TenantOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the rows the retention policies would archive now; writes nothing.

    Example: memory-core retention plan --tenant acme

    JSON: {"policies": {type: days}, "applied": false, "by_type": {type: n}, "archived": [{tenant, ref, type,
    timestamp}], "finished": []}
    """
    _retention(ctx, tenant, config, data_dir, json_out, dry_run=True)


@retention_app.command("apply")
def retention_apply(
    ctx: typer.Context, tenant: TenantOpt = None, config: ConfigOpt = None, data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Archive the rows the retention policies say are due: out of recall and the vector index, kept in the
    graph, check_memory and exports (restorable). Safe to rerun; finishes an interrupted run.

    Example: memory-core retention apply --tenant acme

    JSON: as plan, with "applied": true and "finished" (refs whose vector record an interrupted run left)
    """
    _retention(ctx, tenant, config, data_dir, json_out, dry_run=False)


@retention_app.command("restore")
def retention_restore(
    ctx: typer.Context,
    refs: Annotated[list[str], typer.Argument(help="The archived memories (mem:<id>) to bring back.")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="The tenant (required).")] = None,
    config: ConfigOpt = None, data_dir: DataDirOpt = None, json_out: JsonOpt = False,
) -> None:
    """Bring archived memories back into recall (embedded again). NOT_FOUND, nothing restored, when a ref is
    no archived memory of the tenant. A row still older than its policy is archived again by the next apply.

    Example: memory-core retention restore mem:12 mem:40 --tenant acme

    JSON: {"restored": [refs]}
    """
    from memory_core.operator import restore_archived

    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.parts() as parts:
        restored = restore_archived(parts, tenant_of(tenant), refs)
    if opts.json:
        render.emit_json({"restored": restored})
    else:
        typer.echo(f"Restored {len(restored)} memories: {', '.join(restored)}.")


def _retention(ctx: typer.Context, tenant: str | None, config: Path | None, data_dir: Path | None, json_out: bool,
               *, dry_run: bool) -> None:
    from memory_core.operator import apply_retention

    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.parts() as parts, _bar(opts.json) as progress:
        report = apply_retention(parts, None if tenant is None else [tenant_of(tenant)], dry_run=dry_run,
                                 progress=progress)
    if opts.json:
        render.emit_json(report.to_dict())
    else:
        _print_retention(report)


def _print_retention(report: RetentionReport) -> None:
    if not report.policies:
        typer.echo("No retention policy is set (retention.archive_after_days): nothing is archived.")
        return
    render.table("retention policies", ["type", "archived after (days)"],
                 ([t, d] for t, d in sorted(report.policies.items())))
    render.table("archived" if report.applied else "would archive", ["tenant", "ref", "type", "timestamp"],
                 ([a.tenant, a.ref, a.type, a.timestamp] for a in report.archived))
    if report.finished:
        typer.echo(f"Finished an interrupted run: {len(report.finished)} vector records removed.")
    typer.echo(f"{len(report.archived)} memories {'archived' if report.applied else 'due'}.")


def reembed(
    ctx: typer.Context,
    model: Annotated[str, typer.Option("--model", help="minilm, hash[:DIMENSION], fastembed:<model> or "
                                                          "litellm:<provider/model>.")],
    model_path: Annotated[str | None, typer.Option("--model-path", help="fastembed: a folder holding the model's "
                                                                          "files (nothing downloaded).")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Re-embed the whole store with another model: the new index is built beside the old one (which stays in
    use until the end), a run killed or stopped resumes where it was, and one graph transaction switches to
    it and records the new model; the old index is then dropped. Afterwards set the new model in the
    configuration: opening the store with the old one fails with EMBEDDER_MISMATCH.

    When a server holds the data directory, the server runs it: it goes on answering with the old model
    while the new index is built, then switches to the new one in place (the bar shows its progress).

    Example: memory-core reembed --model fastembed:BAAI/bge-small-en-v1.5

    JSON: {"from", "to", "old_prefix", "prefix", "resumed", "embedded": {tenant: n}, "removed", "switched",
    "seconds", "rows_per_s", "settings": {the embedding settings to configure}}
    """
    from memory_core import load_settings
    from tools.cli.served_reembed import reembed_on_server, running_server

    opts = Common.of(ctx, config, data_dir, json_out)
    root = Path(data_dir or load_settings(config).storage.data_dir).expanduser().resolve()
    server = running_server(root) if root.is_dir() else None
    with _bar(opts.json) as progress:
        if server is not None:  # it holds the store: it runs the re-embed and switches itself over
            # the server's working directory is not this one
            where_from = str(Path(model_path).expanduser().resolve()) if model_path else None
            out = reembed_on_server(server, model, where_from, progress)
        else:
            out = _reembed_here(opts, model, model_path, progress)
    if opts.json:
        render.emit_json(out)
        return
    where = f" by the server (pid {server.pid}), which now answers with it" if server is not None else ""
    typer.echo(f"Re-embedded {sum(out['embedded'].values())} records with {out['to']}{where} in {out['seconds']}s "
               f"({out['rows_per_s']} rows/s){' (resumed)' if out['resumed'] else ''}; the index in use is now "
               f"{out['prefix']}.")
    typer.echo("Set in the configuration [embedding]: " + ", ".join(f"{k} = {v!r}" for k, v in out["settings"].items()))


def _reembed_here(opts: Common, model: str, model_path: str | None,
                  progress: Callable[[str, int, int], None]) -> dict[str, object]:
    """The re-embed in this process, over the store opened here (no server holds it)."""
    from memory_core.operator import embedding_for
    from memory_core.operator import reembed as run

    with opts.parts(graph_only=True) as parts:
        shown, embedder = embedding_for(parts, model, model_path)
        report = run(parts, embedder, progress=progress)
    return {**report.to_dict(), "settings": shown}


def register(app: typer.Typer) -> None:
    app.command()(consolidate)
    app.command()(reembed)
    app.add_typer(retention_app)
