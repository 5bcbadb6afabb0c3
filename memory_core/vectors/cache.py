"""A memory budget for the indexes the embedded Chroma keeps loaded (``storage.vector_cache_mb``).

Embedded Chroma (1.5) loads a collection's HNSW index on the collection's first call and keeps
it until its client is dropped: its own index cache is bounded by a count of indexes derived from
the open-file limit (thousands), not by memory. Each tenant is a collection, so a server's
resident memory grew with every tenant it had touched since it started (about 2 kB a 384-d row:
a tenant of 1M memories holds 2.3 GB) and never came back down.

:class:`VectorCacheBudget` estimates what the loaded indexes take: for each tenant touched since
the client was built, its rows (which the caller counts: the graph's count of its memories) ×
(4 × dimension + :data:`ROW_OVERHEAD`) bytes. When a call would take the estimate past the budget
while other tenants are loaded, it releases them all before serving that call: the client is
rebuilt on the same directory, which frees them, and each collection's next call reads its files
back (Chroma's own log included, so nothing written is lost). Chroma has no call that unloads one
collection, so a release drops every index, not the least recently used one.

A release waits until no call is running on the client (new calls wait behind it), at most
``drain_s``; a call that runs on past that (a first load of a very big index, a stuck Chroma)
defers the release: no call waits for one again until every call in flight has returned, and the
first call past the budget after that releases. A tenant bigger than the whole budget is
not released for its own sake: it stays loaded until another tenant needs the room.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol, TypeVar

from memory_core.vectors.api import VectorStore, index_loaded
from memory_core.vectors.wrapper import Op, VectorStoreWrapper

T = TypeVar("T")
log = logging.getLogger(__name__)
ROW_OVERHEAD = 700  # bytes a row takes in a loaded index beyond its vector (links, labels; measured)
DEFAULT_DIMENSION = 384  # until a vector has been seen
DRAIN_S = 2.0


def index_bytes(rows: int, dimension: int) -> int:
    """What ``rows`` vectors of ``dimension`` take in a loaded index (the estimate the budget counts)."""
    return rows * (4 * dimension + ROW_OVERHEAD)


class Releasable(VectorStore, Protocol):
    def release_indexes(self) -> bool:
        """Drop every loaded index (the next call of each collection loads it again); False if it could not."""
        ...


class VectorCacheBudget(VectorStoreWrapper):
    """The VectorStore Protocol over an embedded Chroma, with its loaded indexes kept under ``budget_bytes``."""

    inner: Releasable

    def __init__(self, inner: Releasable, budget_bytes: int, rows: Callable[[str], int], *,
                 drain_s: float = DRAIN_S) -> None:
        self.inner = inner
        self.budget_bytes = budget_bytes
        self._rows = rows  # a tenant's rows, from an index of its own (Chroma's count scans: 118 s cold at 1M)
        self._drain_s = drain_s
        self._cond = threading.Condition()
        self._running = 0  # calls in flight on the inner store
        self._releasing = False
        self._stalled = False  # a release gave up on a call still running: none is tried until calls drain
        self._loaded: dict[str, int] = {}  # tenant -> rows, for each tenant touched since the last release
        self._dimension = DEFAULT_DIMENSION
        self.releases = 0

    # ---- accounting ----------------------------------------------------------------------
    def loaded_bytes(self) -> int:
        """The estimate for the indexes loaded now."""
        with self._cond:
            return self._bytes(sum(self._loaded.values()))

    def _bytes(self, rows: int) -> int:
        return index_bytes(rows, self._dimension)

    @contextmanager
    def _enter_call(self, tenant: str | None, added: int = 0, dimension: int | None = None) -> Iterator[None]:
        self._enter(tenant, added, dimension)
        try:
            yield
        finally:
            with self._cond:
                self._leave()

    def _leave(self) -> None:
        """Under the condition's lock: one call fewer in flight."""
        self._running -= 1
        if not self._running:
            self._stalled = False
            self._cond.notify_all()

    def _enter(self, tenant: str | None, added: int, dimension: int | None) -> None:
        with self._cond:
            self._wait_release()
            self._running += 1
            if dimension:
                self._dimension = dimension
            if tenant is None:
                return
            rows = self._loaded.get(tenant)
            if rows is not None:
                self._settle(tenant, rows + added)
                return
        try:  # a tenant new to this client: its size, read outside the lock
            rows = self._rows(tenant) + added
        except BaseException:
            with self._cond:
                self._leave()
            raise
        with self._cond:
            self._settle(tenant, max(rows, self._loaded.get(tenant, 0)))

    def _settle(self, tenant: str, rows: int) -> None:
        """Under the condition's lock: count ``tenant`` as loaded with ``rows``; when that takes the
        estimate past the budget and other tenants are loaded, release them all first."""
        others = sum(n for t, n in self._loaded.items() if t != tenant)
        if others and not self._stalled and self._bytes(others + rows) > self.budget_bytes:
            self._leave()  # this call holds no release up: its own, or one already draining
            self._release()
            self._running += 1
        self._loaded[tenant] = rows

    def _wait_release(self) -> None:
        while self._releasing:
            self._cond.wait()

    def _release(self) -> None:
        """Under the condition's lock: wait for the calls in flight (at most ``drain_s``), then
        release every loaded index. Another caller's release under way is waited for instead."""
        if self._releasing:
            self._wait_release()
            return
        self._releasing = True
        try:
            deadline = time.monotonic() + self._drain_s
            while self._running:
                left = deadline - time.monotonic()
                if left <= 0:  # a call still runs on this client: the first call past the budget
                    self._stalled = True  # once every call has drained retries
                    log.warning("vector cache: a call ran past %.1f s; the loaded indexes stay until calls drain",
                                self._drain_s)
                    return
                self._cond.wait(left)
            held = self._bytes(sum(self._loaded.values()))
            if self.inner.release_indexes():
                log.info("vector cache: released %d tenants' indexes (~%d MB) for a %d MB budget",
                         len(self._loaded), held >> 20, self.budget_bytes >> 20)
                self._loaded.clear()
                self.releases += 1
        finally:
            self._releasing = False
            self._cond.notify_all()

    def _call(self, op: Op, tenant: str | None, fn: Callable[[VectorStore], T], *, added: int = 0,
              dimension: int | None = None) -> T:
        with self._enter_call(tenant, added, dimension):
            return fn(self.inner)

    def loaded(self, tenant: str) -> bool:
        return index_loaded(self.inner, tenant)


