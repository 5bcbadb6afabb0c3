"""Every vector-store call with a deadline: a hung Chroma fails a call, never the server.

The write path calls Chroma under the writer lock, so one call that never returns used to
freeze every later write. :class:`DeadlineVectorStore` wraps any VectorStore: each call runs
on a daemon worker thread (reused across calls) and the caller waits at most
``storage.vector_deadline_s``. Past it the call fails with STORE_UNAVAILABLE (the write path
then releases its lock; its journal entry stays for cleanup), and the stuck call is
remembered: while it has not returned the store is *wedged*, and every call is refused at
once with a sentence saying so (rather than piling up stuck threads); :meth:`wedged` says
the same to doctor. When the stuck call returns, the store is healthy again, no restart.

A tenant's first call may load its whole index (embedded Chroma reads a collection's HNSW index on
its first query after the client was built: 3.7-8.3 s for 1M rows here; a first recall from a cold
disk took 49 s), and while it loads, Chroma holds a lock every write takes, in every collection. Slow is not
hung: a call on a tenant whose index is not loaded (:func:`memory_core.vectors.api.index_loaded`)
gets the time its rows may take to load (:data:`LOAD_ROWS_PER_S`) on top of its deadline, and a
call that waits while such a load is under way waits for it (within that load's own time), then
gets ``deadline_s`` again from the load's end. Without that, a load longer than the deadline (a
big tenant's first recall after a restart) failed every tenant's writes and wedged the store until it ended.

Limit: a call that blocks while holding the GIL stops every thread of the process, this
one too. Embedded Chroma did exactly that after failed compactions on a full disk; the
embedded store avoids it by rebuilding its client after an internal error (see
:class:`memory_core.vectors.chroma.ChromaVectorStore`). Client/server Chroma cannot hang
this process that way.
"""

from __future__ import annotations

import math
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from graph.api import GraphStoreError
from memory_core.errors import MemoryCoreError, StoreUnavailableError
from memory_core.vectors.api import VectorStore, index_loaded
from memory_core.vectors.wrapper import Op, VectorStoreWrapper

T = TypeVar("T")
# the slowest index load allowed for, in rows a second: the slowest cold first recall of 1M rows here
# took 49 s (~20k a second); a quarter of that pace leaves room for slower disks before a load counts as hung
LOAD_ROWS_PER_S = 5_000.0
POLL_S = 0.25  # how often a call waiting behind a load checks whether the load has ended


@dataclass(frozen=True)
class _Stuck:
    what: str
    job: _Job
    since: float  # time.monotonic() when the call started


class _Job:
    def __init__(self, fn: Callable[[], Any], until: float = math.inf) -> None:
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
        self.until = until  # time.monotonic() by which it must have returned
        self.ended = math.inf  # time.monotonic() when it returned
        self.done = threading.Event()


class _Workers:
    """Daemon threads reused across calls (a new one only when all are busy); daemon, so a
    call stuck for good never keeps the process from exiting. An idle worker leaves after
    ``IDLE_EXIT_S`` and every idle one leaves at :meth:`close`, so closed stores leak no threads."""

    IDLE_EXIT_S = 30.0

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._idle = 0
        self._closed = False
        self._lock = threading.Lock()

    def submit(self, job: _Job) -> None:
        with self._lock:  # the count and the put move together, so an exiting worker sees either both or neither
            start = self._idle == 0
            if not start:
                self._idle -= 1
            self._jobs.put(job)
        if start:
            threading.Thread(target=self._work, name="vector-store-call", daemon=True).start()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for _ in range(self._idle):
                self._jobs.put(None)
            self._idle = 0

    def _work(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=self.IDLE_EXIT_S)
            except queue.Empty:
                with self._lock:
                    if self._jobs.empty():
                        self._idle -= 1
                        return
                continue
            if job is None:
                return
            try:
                job.value = job.fn()
            except BaseException as exc:  # handed to the caller's thread
                job.error = exc
            finally:
                job.ended = time.monotonic()
                job.done.set()
            with self._lock:
                if self._closed:
                    return
                self._idle += 1


class DeadlineVectorStore(VectorStoreWrapper):
    """A VectorStore whose every call returns, raises, or fails with STORE_UNAVAILABLE by a deadline."""

    def __init__(self, inner: VectorStore, deadline_s: float, rows: Callable[[str], int] | None = None) -> None:
        self.inner = inner
        self.deadline_s = deadline_s
        self._rows = rows  # a tenant's memory count (from the graph): what its index may take to load
        self._loads: list[_Job] = []  # calls in flight that may be loading an index
        self._load_ended = -math.inf  # time.monotonic() when the last of them returned
        self._stuck: list[_Stuck] = []
        self._lock = threading.Lock()
        self._workers = _Workers()

    # ---- the deadline --------------------------------------------------------------------
    def wedged(self) -> str | None:
        """A sentence when a timed-out call is still running inside the store; None when healthy."""
        with self._lock:
            self._stuck = [s for s in self._stuck if not s.job.done.is_set()]
            if not self._stuck:
                return None
            oldest = min(self._stuck, key=lambda s: s.since)
        waited = time.monotonic() - oldest.since
        return (f"The vector store is wedged: a {oldest.what} call has not returned after {waited:.0f} s "
                f"({len(self._stuck)} call(s) stuck). Writes and vector searches are refused until it returns; "
                "free disk space, or restart the server if it persists (recovery at open cleans up).")

    def _allowance(self, tenant: str | None) -> float:
        """The time ``tenant``'s index may take to load, when its next call may load it."""
        if tenant is None or self._rows is None or index_loaded(self.inner, tenant):
            return 0.0
        try:
            return self._rows(tenant) / LOAD_ROWS_PER_S
        except (MemoryCoreError, GraphStoreError):  # the graph cannot say: no allowance, the plain deadline holds
            return 0.0

    def _deadline(self, what: str, fn: Callable[[], T], tenant: str | None = None) -> T:
        wedged = self.wedged()
        if wedged is not None:
            raise StoreUnavailableError(wedged, wedged=True)
        allowance = self._allowance(tenant)
        started = time.monotonic()
        job = _Job(fn, started + self.deadline_s + allowance)
        if allowance:
            with self._lock:
                self._prune_loads()
                self._loads.append(job)
        self._workers.submit(job)
        if not self._wait(job):
            with self._lock:
                self._stuck.append(_Stuck(what, job, started))
            limit = self.deadline_s + allowance
            loading = f", {allowance:.1f} s of it for loading the tenant's index" if allowance else ""
            raise StoreUnavailableError(
                f"The vector store did not answer a {what} call within {limit:.1f} s "
                f"(storage.vector_deadline_s{loading}); nothing was written.", wedged=True, deadline_s=limit)
        if job.error is not None:
            raise job.error
        return job.value

    def _wait(self, job: _Job) -> bool:
        """Wait for ``job`` by its deadline, or longer while an index load explains the wait."""
        until = job.until
        while not job.done.wait(max(0.0, until - time.monotonic())):
            later = self._behind_load(job, time.monotonic())
            if later is None:
                return False
            until = later
        return True

    def _behind_load(self, job: _Job, now: float) -> float | None:
        """When ``job`` may still be waiting for an index load (Chroma's lock), the time to check
        again: soon while a load within its own time is under way, else ``deadline_s`` after the
        last load ended. None when no load explains the wait: ``job`` has timed out."""
        with self._lock:
            self._prune_loads()
            loading = [j.until for j in self._loads if j is not job and j.until > now]
        if loading:
            return min(now + POLL_S, *loading)
        if now < self._load_ended + self.deadline_s:
            return self._load_ended + self.deadline_s
        return None

    def _prune_loads(self) -> None:
        """Drop the loads that returned, keeping when the last of them did (under ``_lock``)."""
        ended = [j.ended for j in self._loads if j.done.is_set()]
        if ended:
            self._load_ended = max(self._load_ended, *ended)
            self._loads = [j for j in self._loads if not j.done.is_set()]

    def loaded(self, tenant: str) -> bool:
        return index_loaded(self.inner, tenant)

    def _call(self, op: Op, tenant: str | None, fn: Callable[[VectorStore], T], *, added: int = 0,
              dimension: int | None = None) -> T:
        # only a call that writes or searches may load the tenant's index: the others get no allowance
        return self._deadline(op, lambda: fn(self.inner), tenant if op in ("upsert", "delete", "query") else None)

    def close(self) -> None:
        self._workers.close()
        self.inner.close()


def vector_store_wedged(store: VectorStore) -> str | None:
    """The wedge sentence of a deadline-wrapped store (None for a healthy or unwrapped one)."""
    wedged = getattr(store, "wedged", None)  # a deadline-wrapped store, or the switch over one
    return wedged() if callable(wedged) else None


__all__ = ["DeadlineVectorStore", "vector_store_wedged"]
