"""Where a tool gets the open ``MemoryCore`` from: the seam between the MCP server and the process serving it.

The server never opens the stores: the process that runs it does (:mod:`tools.serve`), before it
serves (:class:`OpenedCore`) or right after it answers (``tools.serve.deferred_core.DeferredCore``),
and hands them to :func:`tools.mcp.server.build_server`. The server's lifespan closes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import anyio.to_thread

if TYPE_CHECKING:
    from memory_core import MemoryCore


class Stores(Protocol):
    """Where a tool gets the open ``MemoryCore`` from."""

    async def get(self) -> MemoryCore: ...

    async def close(self) -> None: ...


class OpenedCore:
    """Stores opened before the server started."""

    def __init__(self, core: MemoryCore) -> None:
        self.core = core

    async def get(self) -> MemoryCore:
        return self.core

    async def close(self) -> None:
        await anyio.to_thread.run_sync(self.core.close)
