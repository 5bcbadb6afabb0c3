"""token: create the operator token that opens the web inspector (``/ui``)."""

from __future__ import annotations

import secrets
from typing import Annotated

import typer

from memory_core.errors import InvalidInputError
from tools.cli import render
from tools.cli.common import Common, JsonOpt

TOKEN_BYTES = 32


def token(
    ctx: typer.Context,
    operator: Annotated[
        bool, typer.Option("--operator", help="Create the operator token for the /ui inspector.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Create a random operator token and print it once, with the line for the config file.

    The config keeps only the token's sha256 (`[server] operator_token_sha256`); the token itself
    goes to the operator's password manager. Agent tokens (tenant-bound) are made with
    `python -m tools.auth TOKEN TENANT`.

    Example: memory-core token --operator

    JSON: {"token", "operator_token_sha256", "config_line"}
    """
    opts = Common.of(ctx, None, None, json_out)
    if not operator:
        raise InvalidInputError("Pass --operator (agent tokens: python -m tools.auth TOKEN TENANT).", field="operator")
    from tools.auth import hash_token  # the MCP SDK's auth types load with the command, not with --help

    value = secrets.token_urlsafe(TOKEN_BYTES)
    digest = hash_token(value)
    line = f'operator_token_sha256 = "{digest}"'
    if opts.json:
        render.emit_json({"token": value, "operator_token_sha256": digest, "config_line": line})
        return
    typer.echo(f"Operator token (shown once; keep it secret): {value}")
    typer.echo("Put this line under [server] in the config file, then restart the server:")
    typer.echo(line)
    typer.echo("(or set MEMORY_CORE_SERVER_OPERATOR_TOKEN_SHA256)")


def register(app: typer.Typer) -> None:
    app.command()(token)
