"""What every command shares: the common options, opening the store, and the error mapping.

Errors map once, here (called from the app's group, see :mod:`tools.cli.app`)::

    exit 0  success
    exit 1  finished with problems (doctor findings remain, import lines refused)
    exit 2  usage or invalid input   INVALID_INPUT, TENANT_REQUIRED, INVALID_REF, INVALID_CURSOR, …
    exit 3  not found                NOT_FOUND
    exit 4  store or service error   STORE_ERROR, STORE_LOCKED, STORE_UNAVAILABLE, EMBEDDING_UNAVAILABLE, …
    exit 5  configuration            CONFIG_INVALID, EMBEDDER_MISMATCH
    exit 6  conflict                 LOCKED, SUPERSEDED (the memory is locked, or a newer version exists)

The message names the stable code (``memory-core: NOT_FOUND: …`` on stderr); with
``--json`` the error is printed to stdout as ``{"error": {"code": …, "message": …}}``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memory_core import (
    ConfigError,
    EmbeddingError,
    InvalidInputError,
    LockedError,
    MemoryCoreError,
    NotFoundError,
    StoreError,
    SupersededError,
    validate_name,
    validate_tenant,
)

if TYPE_CHECKING:
    from memory_core import MemoryCore
    from memory_core.operator import OperatorParts

EXIT_PROBLEMS = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_STORE = 4
EXIT_CONFIG = 5
EXIT_CONFLICT = 6
JSON_META = "memory_core.json"


def tenant_of(tenant: str | None) -> str:
    """The ``--tenant`` a command acts on: required, never "all tenants" (TENANT_REQUIRED otherwise)."""
    return validate_tenant(tenant)


def required(value: str | None, what: str) -> str:
    """A required ``--session`` / ``--agent``: INVALID_INPUT naming it when missing or malformed."""
    return str(validate_name(value, what))


def exit_code(exc: MemoryCoreError) -> int:
    """The exit code of a deliberate error, by class (never by message)."""
    if isinstance(exc, ConfigError):
        return EXIT_CONFIG
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, StoreError | EmbeddingError):
        return EXIT_STORE
    if isinstance(exc, LockedError | SupersededError):
        return EXIT_CONFLICT
    return EXIT_USAGE


def report_error(exc: MemoryCoreError, json_out: bool) -> None:
    if json_out:
        payload = {"error": {"code": exc.code, "message": exc.message}}
        typer.echo(json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str))
    else:
        typer.echo(f"memory-core: {exc.code}: {exc.message}", err=True)


ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="TOML config file (default: $MEMORY_CORE_CONFIG, else built-in defaults)."),
]
DataDirOpt = Annotated[
    Path | None, typer.Option("--data-dir", "-d", help="Data directory (default: storage.data_dir, .memory-core).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON for scripts instead of tables.")]
TenantOpt = Annotated[
    str | None, typer.Option("--tenant", "-t", help="Tenant to act on (required; never defaults to all tenants).")
]
AsOfOpt = Annotated[
    str | None, typer.Option("--as-of", help="ISO-8601 with timezone: read what was valid at that instant.")
]
ViewerOpt = Annotated[
    str | None, typer.Option("--viewer", help="Read as this agent: also shows its private (visibility=agent) memories.")
]


@dataclass
class Common:
    """The options every command takes; records --json for the error mapping."""

    config: Path | None
    data_dir: Path | None
    json: bool

    @classmethod
    def of(cls, ctx: typer.Context, config: Path | None, data_dir: Path | None, json_out: bool = False) -> Common:
        ctx.meta[JSON_META] = json_out
        return cls(config, data_dir, json_out)

    @contextmanager
    def core(self, graph_only: bool = False) -> Iterator[MemoryCore]:
        """Open the store once for this command (settings: --config, then env), close it after.
        ``graph_only``: the command never embeds nor queries vectors (export, tenants), so a directory
        written with another embedding model opens too (the way to move it to a new model)."""
        from memory_core import MemoryCore  # the store's modules load only for commands that open it
        from tools.server_record import ANNOUNCEMENT

        # STORE_LOCKED names the running server (pid, URL) that holds the directory, and how to stop it
        core = MemoryCore.open(self.data_dir, config_path=self.config, announcement=ANNOUNCEMENT,
                               check_embedder_model=not graph_only)
        try:
            yield core
        finally:
            core.close()

    @contextmanager
    def parts(self, graph_only: bool = False) -> Iterator[OperatorParts]:
        """The store opened as :meth:`core` opens it, as operator commands take it (its operator parts)."""
        with self.core(graph_only) as core:
            yield core.operator_parts()


def parse_json_object(text: str | None, what: str) -> dict[str, Any] | None:
    """A JSON object given on the command line (``--metadata '{"k": 1}'``)."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"--{what} must be a JSON object ({exc.msg}).", field=what) from exc
    if not isinstance(value, dict):
        raise InvalidInputError(f"--{what} must be a JSON object.", field=what)
    return value


def read_text_argument(value: str) -> str:
    """A text argument, or standard input when it is ``-``."""
    return sys.stdin.read() if value == "-" else value
