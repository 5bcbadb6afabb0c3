"""serve (the MCP server over stdio or streamable HTTP) and summarize (a session's miniSummary)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memory_core import ConfigError, MemoryCoreError
from tools.cli import render
from tools.cli.common import Common, ConfigOpt, DataDirOpt, JsonOpt, TenantOpt, required, tenant_of

if TYPE_CHECKING:
    from collections.abc import Callable

    from memory_core import Settings
    from tools.server_record import Announcement


def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP at /mcp instead of stdio.")] = False,
    host: Annotated[str | None, typer.Option(help="HTTP bind address (default: server.host, 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="HTTP port (default: server.port, 8765; 0 = any free port).")] = None,
    announce: Annotated[
        bool, typer.Option("--announce", help="Print the endpoint and an MCP client config snippet once ready.")
    ] = False,
    exclusive: Annotated[
        bool, typer.Option("--exclusive", help="stdio: open the stores in this process (one client per data "
                           "directory) instead of bridging to the directory's shared server.")
    ] = False,
    shared: Annotated[
        bool, typer.Option("--shared", hidden=True, help="The background server that stdio launches start.")
    ] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Run the MCP server: stdio by default, or streamable HTTP with --http (loopback by default).

    Over stdio, every client of one data directory shares one server: the first launch starts it
    in the background (127.0.0.1, a free port, announced in the data directory with a secret
    only its owner can read), later launches join it, and it stops after server.shared_idle_s
    without clients. A running `serve --http` on the directory is joined the same way. The
    tenant and agent binding (MEMORY_CORE_TENANT, MEMORY_CORE_AGENT) stays per client.
    --exclusive keeps the stores in this one process instead.

    With --announce, HTTP prints the URL and a client config snippet on stdout once the stores
    are open and the socket listens (stdio prints the snippet on stderr: stdout is the protocol).

    Example: memory-core serve --http --host 127.0.0.1 --port 8765 --announce

    JSON (--announce --json): one line {"url", "transport", "client_config"}
    """
    # A stdio launch naming its data directory starts (or finds) the shared server before its own
    # settings load: the two processes start side by side (the server validates the same settings).
    head_start = not (http or shared or exclusive or data_dir is None) and _bindings_look_valid()
    locate = _head_start(data_dir, config) if head_start and data_dir is not None else None
    import anyio

    from memory_core import load_settings

    opts = Common.of(ctx, config, data_dir, json_out)
    overrides: dict[str, Any] = {k: v for k, v in (("host", host), ("port", port)) if v is not None}
    settings = load_settings(config, overrides={"server": overrides} if overrides else None)
    where = None if data_dir is None else str(data_dir)
    try:
        if http or shared:
            from tools.serve.http import serve_http  # the MCP SDK loads only where this process serves MCP itself

            on_ready = (lambda url: _announce_http(url, bool(settings.server.tokens), opts.json,
                                                  inspector=bool(settings.server.operator_token_sha256))
                        ) if announce else None
            try:
                anyio.run(lambda: serve_http(settings, data_dir=where, announce=on_ready, shared=shared))
            except OSError as exc:  # binding the socket: port in use, address not local, …
                address = f"{settings.server.host}:{settings.server.port}"
                raise ConfigError(f"Cannot listen on {address}: {exc.strerror or exc}.", key="server.port") from exc
        elif exclusive:
            from tools.serve.stdio import serve_stdio

            if announce:
                _announce_stdio(data_dir, config, opts.json)
            anyio.run(lambda: serve_stdio(settings, data_dir=where))
        else:
            if announce:
                _announce_stdio(data_dir, config, opts.json)
            _bridge(settings, data_dir, config, locate)
    except KeyboardInterrupt:
        return
    except BaseExceptionGroup as group:  # anyio task groups wrap the lifespan's errors
        raise _first_memory_error(group) or group from None


def _bindings_look_valid() -> bool:
    """Whether MEMORY_CORE_TENANT / MEMORY_CORE_AGENT / MEMORY_CORE_SCOPE are well formed: a launch that
    will stop with CONFIG_INVALID must not first start (and leave running) a shared server."""
    import os

    from memory_core import NAME_PATTERN, TENANT_PATTERN, parse_scope

    tenant, agent = os.environ.get("MEMORY_CORE_TENANT"), os.environ.get("MEMORY_CORE_AGENT")
    scope = os.environ.get("MEMORY_CORE_SCOPE")
    return (tenant is None or TENANT_PATTERN.match(tenant) is not None) and (
        agent is None or NAME_PATTERN.match(agent) is not None) and (scope is None or parse_scope(scope) is not None)


def _head_start(data_dir: Path, config: Path | None) -> Callable[[], Announcement]:
    from tools.bridge.locate import head_start  # stdlib only

    return head_start(data_dir.expanduser().resolve(), config)


def _bridge(settings: Settings, data_dir: Path | None, config: Path | None,
            locate: Callable[[], Announcement] | None) -> None:
    """Bridge stdin/stdout to the data directory's shared server, starting it if none runs."""
    from tools.bridge.client import Bridge  # stdlib only: a joining client answers tools/list in milliseconds
    from tools.bridge.locate import ensure_shared_server
    from tools.server_record import BridgeBinding

    root = Path(data_dir if data_dir is not None else settings.storage.data_dir).expanduser().resolve()
    binding = BridgeBinding(settings.server.tenant, settings.server.agent, settings.server.scope)
    bridge = Bridge(locate or (lambda: ensure_shared_server(root, config)), binding, sys.stdin.buffer,
                    sys.stdout.buffer)
    bridge.run()


def _first_memory_error(group: BaseExceptionGroup) -> MemoryCoreError | None:
    for exc in group.exceptions:
        if isinstance(exc, MemoryCoreError):
            return exc
        if isinstance(exc, BaseExceptionGroup) and (found := _first_memory_error(exc)):
            return found
    return None


def _announce_http(url: str, with_tokens: bool, json_out: bool, *, inspector: bool) -> None:
    """The URL, a client config to paste, and where the web inspector is (and whether it is on)."""
    server: dict[str, Any] = {"type": "http", "url": url}
    if with_tokens:
        server["headers"] = {"Authorization": "Bearer <your token>"}
    snippet = {"mcpServers": {"memory-core": server}}
    ui = url.removesuffix("/mcp") + "/ui/"
    if json_out:
        view: dict[str, Any] = {"url": ui, "enabled": inspector}
        if not inspector:
            view["enable"] = "memory-core token --operator"
        render.emit_json({"url": url, "transport": "http", "client_config": snippet, "inspector": view})
    else:
        typer.echo(f"memory-core MCP server listening on {url}")
        typer.echo("MCP client config:")
        typer.echo(json.dumps(snippet, indent=2))
        typer.echo(f"Web inspector: {ui} (sign in with the operator token)" if inspector else
                   f"Web inspector: {ui} is off until an operator token is configured "
                   "(memory-core token --operator prints one and its config line)")
    sys.stdout.flush()


def _announce_stdio(data_dir: Path | None, config: Path | None, json_out: bool) -> None:
    args = ["serve"]
    if data_dir is not None:
        args += ["--data-dir", str(data_dir.resolve())]
    if config is not None:
        args += ["--config", str(config.resolve())]
    launcher = Path(sys.argv[0])
    command = str(launcher.resolve()) if launcher.name == "memory-core" and launcher.is_file() else "memory-core"
    snippet = {"mcpServers": {"memory-core": {"command": command, "args": args}}}
    payload = {"transport": "stdio", "client_config": snippet}
    typer.echo(json.dumps(payload) if json_out else f"MCP client config:\n{json.dumps(snippet, indent=2)}", err=True)


def summarize(
    ctx: typer.Context,
    tenant: TenantOpt = None,
    session: Annotated[str | None, typer.Option("--session", "-s", help="Session to summarize.")] = None,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Summarize a session into its EPISODE (miniSummary) and show where the summary came from.

    The source is "model" (the configured model_provider) or "fallback" (extractive, with the reason).
    A summary is cached until the session gains memories.

    Example: memory-core summarize --tenant acme --session s1

    JSON: {"ref", "session", "summary", "summary_source", "summary_error"?, "covers", "turn_count", "updated", "cached"}
    """
    opts = Common.of(ctx, config, data_dir, json_out)
    with opts.core() as core:
        episode = core.summarize_session(tenant_of(tenant), required(session, "session"))
    if opts.json:
        render.emit_json(episode.to_dict())
        return
    reason = f" ({episode.summary_error})" if episode.summary_error else ""
    typer.echo(
        f"{episode.ref} · {episode.session} · {episode.turn_count} memories · source: "
        f"{episode.summary_source}{reason}{' · cached' if episode.cached else ''}"
    )
    typer.echo(episode.summary)


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(summarize)
