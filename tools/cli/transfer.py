"""export / import: one tenant as JSONL, with a Rich progress bar on the terminal."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated

import typer

from memory_core import InvalidInputError, NotFoundError, StoreLockedError
from tools.cli import render
from tools.cli.common import EXIT_PROBLEMS, Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, tenant_of

LOCKED_ADVICE = ("An import needs the data directory to itself: stop the agents that use it (their MCP server: "
                 "the shared one stdio clients start, or `memory-core serve`), run the import again (a rerun "
                 "finishes an interrupted one), then start them again; nothing they stored is lost. See "
                 "docs/import.md, 'While agents run'.")
SkipBadOpt = Annotated[bool, typer.Option("--skip-bad", help="Import the rest past refused lines (listed).")]
DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="Write nothing; report what would be written.")]

if TYPE_CHECKING:
    from memory_core import MemoryCore


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
    from memory_core.operator import export_count, export_tenant  # loads with the command, not with --help

    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.parts(graph_only=True) as parts:
        total = export_count(parts, tenant_of(tenant))
        with render.progress(opts.json or out is None) as bar, _sink(out) as fh:
            task = bar.add_task(f"export {tenant}", total=total)
            exported = 0
            for line in export_tenant(parts, tenant_of(tenant)):
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
    file: Annotated[str, typer.Argument(help="A JSONL export ('-': standard input), or with --from the "
                                             "other tool's file or folder.")],
    tenant: TenantOpt = None,
    source: Annotated[str | None, typer.Option(
        "--from", help="Move in from another tool: mcp-memory (memory.jsonl, or its read_graph JSON), basic-memory (a "
                       "notes folder), mem0 (a whole get_all dump, JSON or JSONL), markdown (CLAUDE.md or a folder "
                       "of .md files, a vault).")] = None,
    agent: Annotated[str | None, typer.Option(
        "--agent", help="With --from: the author of memories whose source names none (default: the format's "
                        "name).")] = None,
    skip_bad: SkipBadOpt = False,
    dry_run: DryRunOpt = False,
    include_expired: Annotated[bool, typer.Option(
        "--include-expired", help="With --from mem0: also import memories past their expiration_date, ended then "
                                  "(default: skipped and counted).")] = False,
    hygiene: Annotated[bool, typer.Option(
        "--hygiene", help="With --from: leave out what carries no information (acknowledgements, heartbeats, a "
                          "harness's bookkeeping), counted in junk (default: import everything).")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Import a JSONL export, or another tool's memory (--from), into --tenant. Idempotent, crash-safe.

    Running an import again writes nothing twice, and finishes one that was interrupted. By default
    it stops at the first item it refuses (what comes before is in; fix it and run again);
    --skip-bad imports the rest and lists what it refused; --dry-run writes nothing and says what
    would be written. Exit 1 when something was refused.

    memory-core's JSONL (FILE, '-' for standard input): lines of other tenants are refused; a
    memory already present (same session, timestamp and content) is skipped and left as it is;
    memories keep their refs when the id is free. Example: memory-core import acme.jsonl -t acme

    JSON: {"lines", "written", "skipped", "remapped", "edges", "states", "entities", "mentions",
    "relations", "errors", "error_lines": [{line, field, code, message}], "notes", "stopped_at", "dry_run"}
    (+ "sample" with --dry-run; states: rows written with a version or lock state)

    --from FORMAT: FILE is that tool's file or folder; the mapping of each format (entities,
    relations, sessions, timestamps) is in docs/import.md.
    Example: memory-core import ~/.mcp/memory.json --from mcp-memory -t acme --dry-run

    JSON: {"source", "path", "tenant", "agent", "dry_run", "items", "written", "skipped", "duplicates",
    "expired", "junk": {reason: count}, "links_skipped", "redacted": {kind: count},
    "by_kind": {kind: {read, written, skipped}}, "entities" (declared and extracted), "relations",
    "sessions", "errors", "error_items": [{file, line, field, code, message}], "warnings", "notes",
    "stopped_at"} (+ "sample")
    """
    from memory_core.operator import import_lines  # loads with the command, not with --help

    opts = Common.of(ctx, config, data_dir, json_out)
    if source is not None:
        _import_source(opts, source, file, tenant_of(tenant), agent, skip_bad=skip_bad, dry_run=dry_run,
                       include_expired=include_expired, hygiene=hygiene)
        return
    if include_expired:
        raise InvalidInputError("--include-expired applies to --from mem0.", field="include_expired")
    if hygiene:  # an export restores a store as it was
        raise InvalidInputError("--hygiene applies to --from (another tool's memory), not to an export.",
                                field="hygiene")
    total = None if file == "-" else _count_lines(Path(file))
    with _source(file) as lines, _store(opts, dry_run) as core, render.progress(opts.json) as bar:
        task = bar.add_task(f"import {tenant}", total=total)
        counts = import_lines(core.operator_parts(), lines, tenant_of(tenant), lambda n: bar.advance(task, n),
                              skip_bad=skip_bad, dry_run=dry_run)
    if opts.json:
        render.emit_json(counts.to_dict())
    else:
        verb = "Would import" if dry_run else "Imported"
        typer.echo(
            f"{verb} into {tenant}: {counts.written} written ({counts.remapped} under new refs), "
            f"{counts.skipped} already present, {counts.edges} edges, {counts.states} with a version state, "
            f"{counts.entities} new entities, {counts.errors} refused."
        )
        if counts.sample:
            render.table("first rows", ["line", "ref", "session", "type", "content"],
                         ([r["line"], r["ref"], r["session"], r["type"], r["content"][:80]] for r in counts.sample))
        if counts.error_lines:
            render.table(
                "refused lines",
                ["line", "field", "code", "message"],
                ([e["line"], e["field"] or "", e["code"], e["message"]] for e in counts.error_lines),
            )
        for note in counts.notes:
            typer.echo(f"note: line {note['line']}: {note['message']}")
        if counts.stopped_at is not None:
            typer.echo(f"Stopped at line {counts.stopped_at}; the lines before it are imported. Fix it and run the "
                       "import again (nothing is written twice), or pass --skip-bad to import the rest.")
    if counts.errors:
        raise typer.Exit(EXIT_PROBLEMS)


def _import_source(opts: Common, source: str, path: str, tenant: str, agent: str | None, *, skip_bad: bool,
                   dry_run: bool, include_expired: bool, hygiene: bool) -> None:
    """import --from FORMAT PATH: another tool's memory, with a progress bar on a terminal."""
    from memory_core.operator import import_source  # loads with the command, not with --help

    with _store(opts, dry_run) as core, render.progress(opts.json) as bar:
        task = bar.add_task(f"import {source} into {tenant}", total=None)
        report = import_source(core.operator_parts(), source, path, tenant, agent=agent, dry_run=dry_run,
                               skip_bad=skip_bad, progress=lambda n: bar.advance(task, n),
                               total=lambda n: bar.update(task, total=n), include_expired=include_expired,
                               hygiene=hygiene)
    if opts.json:
        render.emit_json(report.to_dict())
    else:
        verb = "Would import" if dry_run else "Imported"
        typer.echo(f"{verb} {report.path} ({source}) into {tenant} as {report.agent}: {report.written} memories "
                   f"written, {report.skipped} already present, {report.errors} refused; {report.entities} "
                   f"entities, {report.relations} relations, {report.sessions} sessions.")
        render.table("by kind", ["kind", "read", "written", "already present"],
                     ([k, c["read"], c["written"], c["skipped"]] for k, c in report.by_kind.items()))
        if report.sample:
            render.table("first rows", ["where", "kind", "session", "content", "entities"],
                         ([f"{r['file']}:{r['line']}", r["kind"], r["session"], render.preview(r["content"]),
                           ", ".join(r["entities"])] for r in report.sample))
        if report.error_items:
            render.table("refused", ["file", "line", "field", "code", "message"],
                         ([e["file"], e["line"], e["field"] or "", e["code"], e["message"]]
                          for e in report.error_items))
        for note in report.notes:
            typer.echo(f"note: {note['file']}:{note['line']}: {note['message']}")
        if report.redacted:
            typer.echo("Secrets redacted: " + ", ".join(f"{n} {kind}" for kind, n in report.redacted.items()) + ".")
        if report.links_skipped:
            typer.echo(f"{report.links_skipped} symbolic links were not followed (named in the notes).")
        if report.duplicates:
            typer.echo(f"{report.duplicates} memories the source holds twice were imported once.")
        if report.expired:
            typer.echo(f"{report.expired} memories had expired: " + (
                "imported, ended at their expiration." if include_expired
                else "skipped (--include-expired imports them, ended at their expiration)."))
        for warning in report.warnings:
            typer.echo(f"warning: {warning['file']}: {warning['message']}")
        if report.stopped_at is not None:
            typer.echo(f"Stopped at {report.stopped_at['file']}:{report.stopped_at['line']}; what comes before it "
                       "is imported. Fix it and run the import again (nothing is written twice), or pass --skip-bad "
                       "to import the rest.")
    if report.errors:
        raise typer.Exit(EXIT_PROBLEMS)


@contextlib.contextmanager
def _store(opts: Common, dry_run: bool) -> Iterator[MemoryCore]:
    """The store an import writes into. A dry run where there is no store yet (the data directory does
    not exist, and the graph would live in it) reads a throwaway one instead: a dry run creates nothing."""
    if dry_run:
        from memory_core import load_settings

        settings = load_settings(opts.config)
        root = Path(opts.data_dir or settings.storage.data_dir).expanduser()
        if not root.exists() and settings.storage.graph == "sqlite":
            from memory_core import HashEmbedder, MemoryCore

            with tempfile.TemporaryDirectory(prefix="memory-core-dry-run-") as tmp, MemoryCore.open(
                    tmp, settings=settings, in_memory_vectors=True, embedder=HashEmbedder()) as core:
                yield core
            return
    try:
        with opts.core() as core:
            yield core
    except StoreLockedError as exc:  # the agents' server holds the directory: say what to do about it
        raise StoreLockedError(f"{exc.message} {LOCKED_ADVICE}", **exc.fields) from exc


def _count_lines(path: Path) -> int | None:
    try:
        with path.open("rb") as fh:
            return sum(1 for _ in fh)
    except OSError:
        return None  # reported when the file is opened


@contextlib.contextmanager
def _source(file: str) -> Iterator[Iterator[bytes]]:
    """The file's lines as bytes (each decoded by the importer, so a line that is not UTF-8 is
    reported by number rather than ending the import)."""
    if file == "-":
        yield iter(sys.stdin.buffer)
        return
    path = Path(file)
    if not path.is_file():
        raise NotFoundError(f"There is no file {file} to import.", path=file)
    with path.open("rb") as fh:
        yield iter(fh)


def register(app: typer.Typer) -> None:
    app.command()(export)
    app.command(name="import")(import_)
