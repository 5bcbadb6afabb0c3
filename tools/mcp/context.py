"""What every MCP tool shares: the lifespan state, the core call, and result shaping.

Tools receive the state through the SDK's typed ``Context`` (``ctx.request_context.
lifespan_context``), never through module globals. Errors map here, once: a
``MemoryCoreError`` becomes an ``isError`` tool result ``"<CODE>: <sentence>"`` with the
structured error beside it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import anyio
import anyio.to_thread
from mcp.server.mcpserver import Context
from mcp_types import CallToolResult, TextContent

from memory_core import MemoryCoreError, RecallResult
from memory_core.observe import Observer, note_stage
from tools.auth import TenantScope
from tools.mcp.preview import PreviewShaper
from tools.mcp.stores import Stores

if TYPE_CHECKING:
    from memory_core import MemoryCore

T = TypeVar("T")
P = ParamSpec("P")


@dataclass
class ServerState:
    """Made once in the server lifespan; shared by every request of every session.

    ``stores`` hands out the open ``MemoryCore``: at once, or once the shared server's
    background open is done (:mod:`tools.mcp.stores`).
    """

    stores: Stores
    shaper: PreviewShaper
    scope: TenantScope
    limiter: anyio.CapacityLimiter
    recall_limit_cap: int = 50
    # single adds, when the core batches them (group commit): a caller waiting for its batch holds a
    # thread but no core, so adds get threads of their own and never keep a recall waiting for one
    add_limiter: anyio.CapacityLimiter | None = None
    observer: Observer = field(default_factory=Observer)  # metrics, logs, traces of each call

    async def call(self, fn: Callable[[MemoryCore], T]) -> T:
        """Run one (blocking) service call on a worker thread, bounded by the limiter."""
        core = await self.stores.get()
        value = await anyio.to_thread.run_sync(fn, core, limiter=self.limiter)
        if isinstance(value, RecallResult) and "stages_ms" in value.diagnostics:
            note_stage("recall", value.diagnostics["stages_ms"])  # the call's metrics and trace time its stages
        return value

    async def call_add(self, fn: Callable[[MemoryCore], T]) -> T:
        """Run one single add on a worker thread: on the adds' own threads when adds are batched."""
        core = await self.stores.get()
        return await anyio.to_thread.run_sync(fn, core, limiter=self.add_limiter or self.limiter)


Ctx = Context[ServerState, Any]


def state_of(ctx: Ctx) -> ServerState:
    return ctx.request_context.lifespan_context


def ok_result(payload: dict[str, Any]) -> CallToolResult:
    """A success: compact JSON text for the model, the same object as structured content."""
    text = json.dumps(payload, ensure_ascii=False, separators=(",", ":"), default=str)
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=payload)


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def error_result(code: str, message: str, **fields: Any) -> CallToolResult:
    """A tool error (``isError``): ``"<CODE>: <one sentence>"`` plus ``{"error": {...}}``."""
    message = _one_line(message)  # a message never spans lines, whatever input it quotes
    error = json.loads(json.dumps({"code": code, "message": message, **fields}, default=str))
    return CallToolResult(
        content=[TextContent(type="text", text=f"{code}: {message}")],
        structured_content={"error": error},
        is_error=True,
    )


def mcp_tool(fn: Callable[P, Awaitable[dict[str, Any]]]) -> Callable[P, Awaitable[CallToolResult]]:
    """Wrap a tool body returning a payload dict: deliberate errors become tool errors.

    Anything that is not a ``MemoryCoreError`` propagates to the SDK, which logs the
    traceback server-side; the server maps it to a generic INTERNAL_ERROR result.
    """

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> CallToolResult:
        try:
            payload = await fn(*args, **kwargs)
        except MemoryCoreError as exc:
            return error_result(**exc.to_dict())
        return ok_result(payload)

    return wrapper
