"""ui: the read-only web inspector alone, on loopback, with no MCP endpoint."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from memory_core import ConfigError
from tools.cli import render
from tools.cli.common import Common, ConfigOpt, DataDirOpt, JsonOpt

DEFAULT_PORT = 8766


def ui(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Loopback address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0 = any free port).")] = DEFAULT_PORT,
    announce: Annotated[bool, typer.Option("--announce", help="Print the inspector's URL once it listens.")] = False,
    config: ConfigOpt = None,
    data_dir: DataDirOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Serve the operator's web inspector at http://HOST:PORT/ui/ (read-only; no MCP endpoint).

    Needs server.operator_token_sha256 (create it with `memory-core token --operator`); log in with
    the token, or send it as `Authorization: Bearer …`. The data directory must not be open in another
    process: to inspect a running server, open /ui on the server itself (`serve --http` mounts it).

    Example: memory-core ui --data-dir /var/lib/memory-core --port 8766 --announce

    JSON (--announce --json): one line {"url"}
    """
    from memory_core import MemoryCore, load_settings
    from tools.auth import is_loopback

    opts = Common.of(ctx, config, data_dir, json_out)
    settings = load_settings(config)
    if not is_loopback(host):
        raise ConfigError(f"memory-core ui listens on loopback only, not {host}; use serve --http to expose /ui.",
                          key="host")
    if not settings.server.operator_token_sha256:
        raise ConfigError("The inspector needs an operator token: run `memory-core token --operator` and put the "
                          "printed line under [server] (operator_token_sha256).", key="server.operator_token_sha256")
    import uvicorn

    from tools.http.listen import listen, url_host
    from tools.ui import standalone_app

    sock = listen(host, port, key="port", backlog=64)
    core = MemoryCore.open(data_dir, settings=settings)
    try:
        url = f"http://{url_host(sock, host)}:{sock.getsockname()[1]}/ui/"
        if announce:
            if opts.json:
                render.emit_json({"url": url})
            else:
                typer.echo(f"memory-core inspector on {url}")
            sys.stdout.flush()
        server = uvicorn.Server(uvicorn.Config(standalone_app(core), log_level="warning", lifespan="off"))
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        core.close()


def register(app: typer.Typer) -> None:
    app.command()(ui)
