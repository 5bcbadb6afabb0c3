"""``memory-core serve --exclusive``: one client over stdin/stdout, served in this process.

The stores open before the transport starts, so a locked or broken data directory fails with its
own message instead of a dropped connection. (A plain ``memory-core serve`` bridges to the data
directory's shared server instead: :mod:`tools.bridge`.)
"""

from __future__ import annotations

from memory_core import Settings
from tools.auth import check_token_hashes
from tools.mcp.server import build_server
from tools.mcp.stores import OpenedCore
from tools.serve.deferred_core import open_core


async def serve_stdio(settings: Settings, *, data_dir: str | None = None) -> None:
    """Serve one client over stdin/stdout on the stores of ``data_dir`` (default ``storage.data_dir``)."""
    check_token_hashes(settings.server.tokens)
    core = await open_core(settings, data_dir)
    core.warm_up_in_background()  # the embedder loads while the client initializes, not on its first call
    await build_server(settings, OpenedCore(core)).run_stdio_async()
