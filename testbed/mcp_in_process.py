"""The MCP server in the test's own process, for the SDK's in-process client (``Client(server)``).

``served(settings, data_dir)`` builds the real server (:func:`tools.mcp.server.build_server`) over
stores that open on the first tool call, as ``MemoryCore.open`` opens them: a test that only lists
the tools opens nothing. The server's lifespan closes them when the client leaves.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import anyio.to_thread

from memory_core.service import MemoryCore
from memory_core.settings.schema import Settings
from tools.mcp.server import MemoryMCPServer, build_server


class OpenOnFirstCall:
    """``tools.mcp.stores.Stores`` over a data directory, opened by the first call that needs it."""

    def __init__(self, settings: Settings, data_dir: str | Path) -> None:
        self._settings = settings
        self._data_dir = data_dir
        self._lock = anyio.Lock()
        self._core: MemoryCore | None = None

    async def get(self) -> MemoryCore:
        async with self._lock:
            if self._core is None:
                self._core = await anyio.to_thread.run_sync(
                    lambda: MemoryCore.open(self._data_dir, settings=self._settings))
            return self._core

    async def close(self) -> None:
        core, self._core = self._core, None
        if core is not None:
            await anyio.to_thread.run_sync(core.close)


def served(settings: Settings, data_dir: str | Path) -> MemoryMCPServer:
    """The MCP server for ``settings`` on the stores of ``data_dir``."""
    return build_server(settings, OpenOnFirstCall(settings, data_dir))
