"""``/healthz`` and ``/readyz``: cheap, unauthenticated, and revealing nothing about tenants or content.

- ``/healthz`` answers 200 ``{"status": "alive"}`` while the process serves HTTP (an orchestrator's
  liveness probe: restart it when this fails).
- ``/readyz`` answers 200 when every check passes and 503 otherwise (a load balancer's readiness
  probe: send no calls while it fails), with the checks by name:

  ``stores``      the graph and the vector store are open (``opening``, or the open's error code);
  ``migrations``  the stores' schema is upgraded (an open does that before anything else);
  ``data_dir``    this process still holds its data directory's lock (replicas hold none: ``ok``);
  ``model``       the embedding model has loaded (``loading`` while the warm-up runs);
  ``writer``      no repair or other long job holds the writer lock (``busy: repair``, or ``busy``
                  past ``WRITER_BUSY_S`` whatever holds it: writes would queue behind it).

Each check is a fixed word or an error code, never a path, a tenant or a message. Both answer GET
and HEAD only, before authentication, the HTTP guard or any body is read.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from starlette.types import ASGIApp, Receive, Scope, Send

from tools.mcp.stores import OpenedCore, Stores
from tools.serve.deferred_core import DeferredCore

if TYPE_CHECKING:
    from memory_core import MemoryCore

HEALTH_PATH = "/healthz"
READY_PATH = "/readyz"
WRITER_BUSY_S = 5.0  # a writer lock held longer than this makes the server not ready, whatever holds it


def open_core_of(stores: Stores) -> MemoryCore | None:
    """The open ``MemoryCore`` behind ``stores``, without waiting for (or starting) an open."""
    if isinstance(stores, OpenedCore):
        return stores.core
    if isinstance(stores, DeferredCore):
        return stores.peek()
    return None


class Readiness:
    """What ``/readyz`` checks; also runs the warm-up, so it knows when the model has loaded."""

    def __init__(self, stores: Stores, *, writer_busy_s: float = WRITER_BUSY_S) -> None:
        self.stores = stores
        self.writer_busy_s = writer_busy_s
        self._warming: list[threading.Thread] | None = None
        self.on_change: Callable[[bool], None] | None = None  # told each verdict (the ``ready`` metric)

    def warm_up(self, core: MemoryCore) -> None:
        """Start loading the model and the vector indexes (the server's first step once the stores are open)."""
        self._warming = core.warm_up_in_background()

    def checks(self) -> dict[str, str]:
        core = open_core_of(self.stores)
        if core is None:
            error = self.stores.last_error if isinstance(self.stores, DeferredCore) else None
            return {"stores": error.code if error is not None else "opening"}
        checks = {"stores": "ok", "migrations": "ok"}
        lock = core.dir_lock
        checks["data_dir"] = "ok" if lock is None or lock.held() else "lost"
        warming = self._warming
        checks["model"] = "loading" if warming is None or any(t.is_alive() for t in warming) else "ok"
        held_s, purpose = core.operator_parts().writer.lock.held_for()
        if purpose is not None:
            checks["writer"] = f"busy: {purpose}"
        elif held_s > self.writer_busy_s:
            checks["writer"] = "busy"
        else:
            checks["writer"] = "ok"
        return checks

    def verdict(self) -> tuple[bool, dict[str, str]]:
        checks = self.checks()
        ready = all(v == "ok" for v in checks.values())
        if self.on_change is not None:
            self.on_change(ready)
        return ready, checks


class ProbeRoutes:
    """ASGI middleware answering the two probes; everything else goes on to ``app``."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path") if scope["type"] == "http" else None
        if path not in (HEALTH_PATH, READY_PATH):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await reply(send, 405, {"error": "method_not_allowed"}, head=False, allow="GET, HEAD")
            return
        body: dict[str, object]
        if path == HEALTH_PATH:
            status, body = 200, {"status": "alive"}
        else:
            ready, checks = self.readiness.verdict()
            status, body = (200 if ready else 503), {"status": "ready" if ready else "not ready", "checks": checks}
        await reply(send, status, body, head=scope["method"] == "HEAD")


async def reply(send: Send, status: int, value: object, *, head: bool = False, allow: str | None = None) -> None:
    """A small JSON answer, never cached."""
    body = json.dumps(value, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
               (b"cache-control", b"no-store")]
    if allow is not None:
        headers.append((b"allow", allow.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})
