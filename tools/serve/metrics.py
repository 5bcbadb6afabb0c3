"""``/metrics``: where Prometheus scrapes a server, and who may (:mod:`memory_core.observe.metrics`).

Never open by default (``metrics.enabled = false``). Once on, the operator chooses where:

- on the server's own port (``metrics.port`` unset): a request needs a bearer token — the metrics
  token (``metrics.token_sha256``), or an ``admin``-scope token of ``[server.tokens]`` as long as no
  series carries tenant labels (``metrics.tenant_labels = 0``: a tenant's admin must not read other
  tenants' names); with neither, the server refuses to start (CONFIG_INVALID);
- on a listener of its own (``metrics.port``, on ``metrics.host``, 127.0.0.1 by default): open to
  local processes, or behind the metrics token when one is set, which a non-loopback host requires.

:func:`watch_store` adds what is read when scraped: the domain's tallies (group commit's batch sizes
and queue waits, the writer lock's waits), rows and vectors per store (counted at most every
``metrics.store_counts_s``), the bridged stdio clients, and whether ``/readyz`` passes.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import socket
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import anyio.to_thread
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_core import ConfigError, Settings
from memory_core import Scope as Access
from memory_core.observe import Metrics, TallySnapshot
from tools.auth import is_loopback
from tools.mcp.stores import Stores
from tools.serve.bridged import ActivityTracker, bearer
from tools.serve.probes import Readiness, open_core_of, reply

if TYPE_CHECKING:
    from memory_core import MemoryCore

METRICS_PATH = "/metrics"


def access_hashes(settings: Settings) -> frozenset[str]:
    """The sha256 of every token that may read ``/metrics`` on the server's own port."""
    hashes = set()
    if settings.metrics.token_sha256:
        hashes.add(settings.metrics.token_sha256.lower())
    if settings.metrics.tenant_labels == 0:
        hashes |= {digest for digest, binding in settings.server.tokens.items() if binding.scope == Access.ADMIN}
    return frozenset(hashes)


def check_metrics_settings(settings: Settings) -> None:
    """Refuse, at start, metrics that would be open to anyone or closed to everyone."""
    m = settings.metrics
    if not m.enabled:
        return
    if m.port is None and not access_hashes(settings):
        raise ConfigError(
            "metrics.enabled serves /metrics on the server's own port behind a token, and no token may read it: "
            "set metrics.token_sha256 (memory-core token --metrics), give a [server.tokens] entry scope = \"admin\" "
            "(without metrics.tenant_labels), or set metrics.port for a loopback listener of its own.",
            key="metrics.token_sha256")
    if m.port is not None and not is_loopback(m.host) and not m.token_sha256:
        raise ConfigError(
            f"Refusing to serve metrics on {m.host}: it is reachable from other machines and metrics.token_sha256 "
            "is not set. Set it, or bind metrics.host to 127.0.0.1.", key="metrics.host")


class MetricsRoute:
    """ASGI middleware answering ``GET /metrics`` for a bearer token of ``allowed`` (None: anyone who reaches it)."""

    def __init__(self, app: ASGIApp | None, metrics: Metrics, allowed: frozenset[str] | None) -> None:
        self.app = app
        self.metrics = metrics
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != METRICS_PATH:
            if self.app is None:  # the listener of its own serves nothing else
                if scope["type"] == "http":
                    await reply(send, 404, {"error": "not_found"})
                return
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await reply(send, 405, {"error": "method_not_allowed"}, allow="GET, HEAD")
            return
        if self.allowed is not None and not _allowed(bearer(scope), self.allowed):
            await _refused(send)
            return
        accept = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"accept"), "")
        # on a worker thread: store counts may touch the stores
        body, content_type = await anyio.to_thread.run_sync(self.metrics.render, accept)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode()),
                                (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def _allowed(token: str | None, allowed: frozenset[str]) -> bool:
    if not token:
        return False
    digest = hashlib.sha256(token.encode("utf-8", "surrogateescape")).hexdigest()
    return any(hmac.compare_digest(digest, h) for h in allowed)


async def _refused(send: Send) -> None:
    body = b'{"error":"invalid_token","error_description":"/metrics needs the metrics token or an admin token."}'
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b'Bearer error="invalid_token"')]})
    await send({"type": "http.response.body", "body": body})


class StoreCounts:
    """Rows in the graph and records in the vector store, per tenant, counted at most every ``every_s``."""

    def __init__(self, stores: Stores, metrics: Metrics, every_s: float) -> None:
        self.stores = stores
        self.metrics = metrics
        self.every_s = every_s
        self._lock = threading.Lock()
        self._at = -float("inf")
        self._values: list[tuple[Sequence[str], float]] = []

    def read(self) -> Iterable[tuple[Sequence[str], float]]:
        with self._lock:  # one count at a time; a scrape meanwhile waits and reads it
            if time.monotonic() - self._at >= self.every_s:
                core = open_core_of(self.stores)
                if core is not None:
                    self._values = self._count(core)
                    self._at = time.monotonic()
            return list(self._values)

    def _count(self, core: MemoryCore) -> list[tuple[Sequence[str], float]]:
        parts = core.operator_parts()  # the operator's view: counts, not rows
        graph, vectors = parts.graph, parts.vectors
        label = self.metrics.tenants
        totals: dict[tuple[str, ...], float] = {}
        for tenant in graph.tenants():
            by = (label(tenant),) if label is not None else ()
            totals[("graph", *by)] = totals.get(("graph", *by), 0) + graph.count(tenant)
            totals[("vectors", *by)] = totals.get(("vectors", *by), 0) + vectors.count(tenant)
        return sorted(totals.items())


def watch_store(metrics: Metrics, stores: Stores, readiness: Readiness, tracker: ActivityTracker,
                store_counts_s: float) -> None:
    """Register everything read at scrape time (see the module docstring)."""

    def tally(read: str) -> TallySnapshot | None:
        core = open_core_of(stores)
        if core is None:
            return None
        writer = core.operator_parts().writer
        batches = writer.batches
        if read == "lock":
            return writer.lock.waits.snapshot()
        if batches is None:
            return None
        return (batches.sizes if read == "sizes" else batches.queue_waits).snapshot()

    metrics.watch_tally("writer_lock_wait_seconds", "Wait to acquire the store's writer lock.", lambda: tally("lock"))
    metrics.watch_tally("group_commit_batch_size", "Adds written per group-commit batch.", lambda: tally("sizes"))
    metrics.watch_tally("group_commit_queue_wait_seconds", "An add's wait in the group-commit queue before its "
                        "batch was formed.", lambda: tally("queue"))
    def outcomes(read: str) -> list[tuple[tuple[str], float]]:
        core = open_core_of(stores)
        if core is None:
            return []
        writer = core.operator_parts().writer
        counts = (writer.outcomes if read == "rows" else writer.flagged).snapshot()
        return [((label,), float(n)) for label, n in sorted(counts.items())]

    metrics.watch_counter("rows", "Rows the write path answered: stored, retry (an idempotent add), or why "
                          "write-time hygiene did not store it.", ("outcome",), lambda: outcomes("rows"))
    metrics.watch_counter("flagged_rows", "Rows stored with a poisoning flag, by flag.", ("flag",),
                          lambda: outcomes("flagged"))
    counts = StoreCounts(stores, metrics, store_counts_s)
    labels = ("store", "tenant") if metrics.tenants is not None else ("store",)
    metrics.watch_gauge("store_rows", "Memories in the graph (store=graph) and records in the vector store "
                        "(store=vectors).", labels, counts.read)
    metrics.watch_gauge("shared_clients", "stdio clients bridged to this server (attached now).", (),
                        lambda: [((), float(tracker.attached))])
    readiness.on_change = metrics.set_ready


class _QuietServer(uvicorn.Server):
    """uvicorn for the metrics listener: the main server handles the process's signals and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def metrics_listener(settings: Settings, metrics: Metrics) -> tuple[socket.socket, uvicorn.Server]:
    """The listener of its own (``metrics.port``): its socket (bound now, so a busy port fails the start) and server."""
    from tools.http.listen import listen

    m = settings.metrics
    assert m.port is not None
    sock = listen(m.host, m.port, key="metrics.port")
    allowed = frozenset({m.token_sha256.lower()}) if m.token_sha256 else None
    config = uvicorn.Config(MetricsRoute(None, metrics, allowed), log_level="warning", lifespan="off")
    return sock, _QuietServer(config)
