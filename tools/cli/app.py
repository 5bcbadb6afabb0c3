"""The ``memory-core`` command: one Typer app, commands registered from one module per group.

Errors map once, in :class:`MemoryCoreGroup`: a ``MemoryCoreError`` raised by any command
becomes its exit code and a message naming the stable code (see :mod:`tools.cli.common`).
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from memory_core import MemoryCoreError
from tools.cli import entities, hooks, inspect, maintenance, memories, related, serve, token, transfer, ui, versions
from tools.cli.common import JSON_META, exit_code, report_error

EPILOG = (
    "Exit codes: 0 ok · 1 finished with problems (doctor findings, refused import lines) · "
    "2 usage or invalid input · 3 not found · 4 store error · 5 configuration · "
    "6 conflict (LOCKED, SUPERSEDED). "
    "Errors name their stable code (e.g. TENANT_REQUIRED); with --json they print "
    '{"error": {"code", "message"}} on stdout.'
)


class MemoryCoreGroup(TyperGroup):
    """Maps deliberate errors of every command to an exit code and a coded message."""

    def invoke(self, ctx: typer.Context) -> Any:  # type: ignore[override]
        try:
            return super().invoke(ctx)
        except MemoryCoreError as exc:
            report_error(exc, bool(ctx.meta.get(JSON_META)))
            ctx.exit(exit_code(exc))


app = typer.Typer(
    name="memory-core",
    cls=MemoryCoreGroup,
    help="Operate a memory-core store: serve it over MCP, inspect, recall, export/import and repair.",
    epilog=EPILOG,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
    # Plain help: Rich's help renderer (rich, markdown-it) doubled the cost of `--help`
    rich_markup_mode=None,
)
for group in (memories, versions, inspect, transfer, maintenance, serve, ui, token, entities, related, hooks):
    group.register(app)


def main() -> None:
    """Console-script entry point (``memory-core``)."""
    app(prog_name="memory-core")
