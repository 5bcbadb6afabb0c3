"""token: create a bearer token for an agent (bound to a tenant, optionally one agent, with a scope), the operator,
or a metrics scraper.

The token is random, shown once; the config keeps only its sha256, so the file holds nothing
worth stealing (see :mod:`tools.auth`).
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any

import typer

from memory_core import DEFAULT_SCOPE, NAME_PATTERN, SCOPE_NAMES, TENANT_PATTERN, InvalidInputError, parse_scope
from tools.cli import render
from tools.cli.common import Common, JsonOpt

TOKEN_BYTES = 32


def token(
    ctx: typer.Context,
    tenant: Annotated[
        str | None, typer.Argument(help="The tenant the token binds (its agents' connections act as it).")
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Bind one agent too: the only author and viewer it can use.")
    ] = None,
    scope: Annotated[
        str | None, typer.Option("--scope", "-s", help="What the token may do: read (read tools only), write "
                                 "(default: add, handoffs, and change its own rows), admin (change any row).")
    ] = None,
    operator: Annotated[
        bool, typer.Option("--operator", help="Create the operator token for the /ui inspector instead.")
    ] = False,
    metrics: Annotated[
        bool, typer.Option("--metrics", help="Create the token that reads /metrics (and nothing else) instead.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Create a random bearer token and print it once, with the line for the config file.

    `memory-core token acme [--agent alice] [--scope read|write|admin]` makes an agent token: put
    the printed line in the server.tokens table and give the token to the agent's MCP client
    (Authorization: Bearer ...). read lists and calls only the read tools; write (the default) also
    adds memories and handoffs and corrects, locks or deletes the rows its agent wrote; admin
    changes any row. `memory-core token --operator` makes the token that opens the web inspector (/ui);
    `memory-core token --metrics` the one a Prometheus scraper sends to /metrics.
    The config keeps only the token's sha256; the token itself goes to a password manager.

    Example: memory-core token acme --agent reviewer --scope read

    JSON: {"token", "token_sha256", "section", "config_line", "tenant"?, "agent"?, "scope"?}
    """
    opts = Common.of(ctx, None, None, json_out)
    if operator and metrics:
        raise InvalidInputError("Pass --operator or --metrics, not both: each is a token of its own.", field="metrics")
    special = "operator" if operator else "metrics" if metrics else None
    if (special is not None) == (tenant is not None):
        raise InvalidInputError(
            "Name the tenant the token binds (memory-core token TENANT [--agent AGENT]) or pass --operator "
            "or --metrics.",
            field="tenant",
        )
    if special is not None and agent is not None:
        raise InvalidInputError(f"--agent binds an agent token; the {special} token binds no agent.", field="agent")
    if special is not None and scope is not None:
        raise InvalidInputError(f"--scope is an agent token's; the {special} token has one use only.", field="scope")
    granted = DEFAULT_SCOPE if scope is None else parse_scope(scope)
    if granted is None:
        raise InvalidInputError(f"'{str(scope)[:80]}' is not a scope: one of {', '.join(SCOPE_NAMES)}.", field="scope")
    if tenant is not None and not TENANT_PATTERN.match(tenant):
        raise InvalidInputError(
            f"'{tenant[:80]}' is not a tenant name: 1-128 characters, letters, digits and _.:@- "
            "(starting with a letter or digit).",
            field="tenant",
        )
    if agent is not None and not NAME_PATTERN.match(agent):
        raise InvalidInputError(
            f"'{agent[:80]}' is not an agent id: 1-128 printable characters without whitespace.", field="agent"
        )
    from tools.auth import hash_token, token_config_line  # the MCP SDK's auth types load with the command

    value = secrets.token_urlsafe(TOKEN_BYTES)
    digest = hash_token(value)
    if special == "metrics":
        _print_metrics_token(value, digest, opts.json)
        return
    if tenant is None:
        _print_operator_token(value, digest, opts.json)
        return
    line = token_config_line(digest, tenant, agent, granted)
    if opts.json:
        payload: dict[str, Any] = {"token": value, "token_sha256": digest, "section": "server.tokens",
                                   "config_line": line, "tenant": tenant}  # fmt: skip
        if agent is not None:
            payload["agent"] = agent
        payload["scope"] = granted.value
        render.emit_json(payload)
        return
    bound = f"tenant '{tenant}'" + (f", agent '{agent}'" if agent is not None else "") + f", scope '{granted}'"
    typer.echo(f"Token for {bound} (shown once; keep it secret): {value}")
    typer.echo("Put this line under [server.tokens] in the config file, then restart the server:")
    typer.echo(line)
    typer.echo("The agent's MCP client sends it as the header  Authorization: Bearer <token>")


def _print_operator_token(value: str, digest: str, json_out: bool) -> None:
    line = f'operator_token_sha256 = "{digest}"'
    if json_out:
        payload = {"token": value, "token_sha256": digest, "operator_token_sha256": digest, "section": "server"}
        render.emit_json({**payload, "config_line": line})
        return
    typer.echo(f"Operator token (shown once; keep it secret): {value}")
    typer.echo("Put this line under [server] in the config file, then restart the server:")
    typer.echo(line)
    typer.echo("(or set MEMORY_CORE_SERVER_OPERATOR_TOKEN_SHA256)")


def _print_metrics_token(value: str, digest: str, json_out: bool) -> None:
    line = f'token_sha256 = "{digest}"'
    if json_out:
        render.emit_json({"token": value, "token_sha256": digest, "section": "metrics", "config_line": line})
        return
    typer.echo(f"Metrics token (shown once; keep it secret): {value}")
    typer.echo("Put this line under [metrics] in the config file (with enabled = true), then restart the server:")
    typer.echo(line)
    typer.echo("(or set MEMORY_CORE_METRICS_TOKEN_SHA256); the scraper sends  Authorization: Bearer <token>")


def register(app: typer.Typer) -> None:
    app.command()(token)
