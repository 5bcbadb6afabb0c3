"""Every vector-store call with a deadline: a hung Chroma fails a call, never the server.

The write path calls Chroma under the writer lock, so one call that never returns used to
freeze every later write. :class:`DeadlineVectorStore` wraps any VectorStore: each call runs
on a daemon worker thread (reused across calls) and the caller waits at most
``storage.vector_deadline_s``. Past it the call fails with STORE_UNAVAILABLE (the write path
then releases its lock; its journal entry stays for cleanup), and the stuck call is
remembered: while it has not returned the store is *wedged*, and every call is refused at
once with a sentence saying so (rather than piling up stuck threads); :meth:`wedged` says
the same to doctor. When the stuck call returns, the store is healthy again, no restart.

Limit: a call that blocks while holding the GIL stops every thread of the process, this
one too. Embedded Chroma did exactly that after failed compactions on a full disk; the
embedded store avoids it by rebuilding its client after an internal error (see
:class:`memory_core.vector_store.ChromaVectorStore`). Client/server Chroma cannot hang
this process that way.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_core.errors import StoreUnavailableError
from memory_core.vector_store import Metadata, VectorHit, VectorStore

T = TypeVar("T")


@dataclass(frozen=True)
class _Stuck:
    what: str
    job: _Job
    since: float  # time.monotonic() when the call started


class _Job:
    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.value: Any = None
        self.error: BaseException | None = None
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
                job.done.set()
            with self._lock:
                if self._closed:
                    return
                self._idle += 1


class DeadlineVectorStore:
    """A VectorStore whose every call returns, raises, or fails with STORE_UNAVAILABLE by a deadline."""

    def __init__(self, inner: VectorStore, deadline_s: float) -> None:
        self.inner = inner
        self.deadline_s = deadline_s
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

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        wedged = self.wedged()
        if wedged is not None:
            raise StoreUnavailableError(wedged, wedged=True)
        job = _Job(fn)
        started = time.monotonic()
        self._workers.submit(job)
        if not job.done.wait(self.deadline_s):
            with self._lock:
                self._stuck.append(_Stuck(what, job, started))
            raise StoreUnavailableError(
                f"The vector store did not answer a {what} call within {self.deadline_s:g} s "
                "(storage.vector_deadline_s); nothing was written.", wedged=True, deadline_s=self.deadline_s)
        if job.error is not None:
            raise job.error
        return job.value

    # ---- the VectorStore Protocol --------------------------------------------------------
    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        self._call("upsert", lambda: self.inner.upsert(tenant, ids, embeddings, documents, metadatas))

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self._call("delete", lambda: self.inner.delete(tenant, ids))

    def query(self, tenant: str, embedding: Sequence[float], n: int,
              where: dict[str, Any] | None = None, ids: Sequence[str] | None = None) -> list[VectorHit]:
        return self._call("query", lambda: self.inner.query(tenant, embedding, n, where, ids))

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        return self._call("get", lambda: self.inner.existing_ids(tenant, ids))

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        return self._call("get", lambda: self.inner.documents(tenant, ids))

    def all_ids(self, tenant: str) -> set[str]:
        return self._call("get", lambda: self.inner.all_ids(tenant))

    def count(self, tenant: str) -> int:
        return self._call("count", lambda: self.inner.count(tenant))

    def tenants(self) -> list[str]:
        return self._call("list", self.inner.tenants)

    def close(self) -> None:
        self._workers.close()
        self.inner.close()


def vector_store_wedged(store: VectorStore) -> str | None:
    """The wedge sentence of a deadline-wrapped store (None for a healthy or unwrapped one)."""
    return store.wedged() if isinstance(store, DeadlineVectorStore) else None


__all__ = ["DeadlineVectorStore", "vector_store_wedged"]
