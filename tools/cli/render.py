"""Output for people (Rich tables, trees, panels) and for scripts (one JSON document per line)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import typer

from memory_core import MemoryRow, RecallResult

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress
    from rich.tree import Tree

PREVIEW = 80


WIDE = 160


def console() -> Console:
    """A console on the current stdout (tests swap stdout; build it per call); wide when piped."""
    from rich.console import Console  # rich loads for output only, not for --help

    out = Console(highlight=False, soft_wrap=False)
    if not out.is_terminal:
        out.width = WIDE
    return out


def err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def progress(quiet: bool) -> Progress:
    """A progress bar on stderr, shown only on a terminal (never in --json mode)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    out = err_console()
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=out,
        transient=True,
        disable=quiet or not out.is_terminal,
    )


def emit_json(payload: Any) -> None:
    """One compact JSON document on one line (stable keys; parseable line by line)."""
    typer.echo(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str))


def preview(text: str, chars: int = PREVIEW) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= chars else flat[: chars - 1] + "…"


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table

    out = Table(title=title, show_lines=False, header_style="bold")
    for column in columns:
        out.add_column(column, overflow="fold")
    for row in rows:
        out.add_row(*("" if cell is None else str(cell) for cell in row))
    console().print(out)


def memory_table(title: str | None, rows: Sequence[MemoryRow], *, scored: bool = False) -> None:
    """Memories as a table: ref, type, session, agent, time (+ confidence and signal), preview.

    A row standing for repeats of its fact shows ``×N`` after its ref (``--json`` names the others); a row the
    poisoning scan flagged shows ``⚑`` and its flags before its preview (:mod:`memory_core.write.poisoning`)."""
    columns = ["ref", "type", "session", "agent", "time"]
    if scored:
        columns += ["confidence", "signal"]
    body = []
    for row in rows:
        ref = row.ref if row.repeats <= 1 else f"{row.ref} ×{row.repeats}"
        cells: list[Any] = [ref, row.type, row.session, row.agent, row.timestamp.strftime("%Y-%m-%d %H:%M:%S")]
        if scored:
            reason = row.match_reason or {}
            cells += ["" if row.confidence is None else f"{row.confidence:.3f}", reason.get("signal", "")]
        flagged = f"⚑ {','.join(row.flags)} · " if row.flags else ""
        body.append([*cells, flagged + preview(row.content)])
    table(title, [*columns, "preview"], body)


NEWEST_FIRST_NOTE = ("Newest first: under --type handoff, time orders the rows that pass the quality gate; "
                     "confidence is why a row passed, not a ranking (--deep ranks by relevance).")


def recall_title(result: RecallResult, query: str) -> str:
    """The recall table's title: how many rows and in what order, so confidences are not misread as
    a ranking when time orders the rows (``order: "newest_first"``, and the empty query's most recent)."""
    n = len(result.messages)
    if result.order == "newest_first":
        return f"recall: {n} rows, newest first"
    if not query.strip():
        return f"recall: {n} most recent, newest first"
    return f"recall: {n} rows by confidence"


def recall_diagnostics(diagnostics: dict[str, Any]) -> None:
    """How a recall ran (``--explain``): its time per stage on one line, then the rest, key by key."""
    from memory_core import describe_stages

    rest = dict(diagnostics)
    stages = rest.pop("stages_ms", None)
    elapsed = rest.pop("elapsed_ms", None)
    if elapsed is not None:
        typer.echo(f"elapsed: {elapsed} ms")
    if stages:
        typer.echo(f"stages: {describe_stages(stages)}")
    for key, value in rest.items():
        typer.echo(f"{key}: {value if isinstance(value, str) else json.dumps(value, default=str)}")


def fields(title: str, values: dict[str, Any]) -> None:
    """A two-column key/value table."""
    table(
        title,
        ["field", "value"],
        ([k, v if isinstance(v, str) else json.dumps(v, default=str)] for k, v in values.items()),
    )


def tree(node: dict[str, Any]) -> None:
    """A graph neighbourhood (``Operator.graph_neighbourhood``) as a Rich tree."""
    from rich.tree import Tree

    root = Tree(_label(node))
    _grow(root, node)
    console().print(root)


def _label(node: dict[str, Any]) -> str:
    seen = " (shown above)" if node.get("seen") else ""
    return f"[bold]{node['node']}[/bold] {node['kind']} {_escape(node.get('label', ''))}{seen}"


def _grow(branch: Tree, node: dict[str, Any]) -> None:
    for edge in node["edges"]:
        arrow = "->" if edge["direction"] == "out" else "<-"
        child = branch.add(f"{arrow} {edge['kind']} {_label(edge['node'])}")
        _grow(child, edge["node"])
    if node.get("more"):
        branch.add(f"… {node['more']} more edges")


def _escape(text: str) -> str:
    return text.replace("[", "\\[")


def redacted_note(redacted: dict[str, int]) -> str:
    """`` (secrets redacted: 1 aws-access-key, 2 password)`` after a write that had some; else ''."""
    if not redacted:
        return ""
    return " (secrets redacted: " + ", ".join(f"{n} {kind}" for kind, n in redacted.items()) + ")"
