"""``memory-core serve --exclusive``: one client over stdin/stdout, served in this process.

The stores open before the transport starts, so a locked or broken data directory fails with its
own message instead of a dropped connection. Logs go to stderr and spans to OTLP as configured
(:mod:`memory_core.observe`); metrics need HTTP. (A plain ``memory-core serve`` bridges to the data
directory's shared server instead: :mod:`tools.bridge`.)
"""

from __future__ import annotations

from memory_core import Settings
from memory_core.observe import Observer, configure_logs
from tools.auth import check_token_hashes
from tools.mcp.server import build_server, package_version
from tools.mcp.stores import OpenedCore
from tools.registry import TOOL_SPECS
from tools.serve.deferred_core import open_core
from tools.serve.upkeep import start_upkeep


async def serve_stdio(settings: Settings, *, data_dir: str | None = None) -> None:
    """Serve one client over stdin/stdout on the stores of ``data_dir`` (default ``storage.data_dir``)."""
    check_token_hashes(settings.server.tokens)
    configure_logs(settings.logs.format, settings.logs.level)  # on stderr: stdout is the protocol
    observer = Observer.from_settings(settings, tools=[spec.name for spec in TOOL_SPECS], version=package_version(),
                                      serves_metrics=False)  # /metrics needs HTTP: `serve --http`
    core = await open_core(settings, data_dir)
    core.warm_up_in_background()  # the embedder loads while the client initializes, not on its first call
    stores = OpenedCore(core)
    schedule = start_upkeep(settings, stores, observer)  # consolidation.every_s: off by default
    try:
        await build_server(settings, stores, observer=observer).run_stdio_async()
    finally:
        if schedule is not None:
            schedule.stop()
        observer.close()
