"""Every vector-store call with a deadline: a hung Chroma fails a call, never the server.

Embedded Chroma can block forever (futex waits inside its upsert/delete on a full disk),
and the write path calls it under the writer lock, so one hung call used to freeze every
later write. :class:`DeadlineVectorStore` wraps any VectorStore: each call runs on its own
daemon thread and the caller waits at most ``storage.vector_deadline_s``. Past it the call
fails with STORE_UNAVAILABLE (the write path then releases its lock, and its journal entry
stays for cleanup), and the thread that is still stuck is remembered: while one is, the
store is *wedged* and every call is refused at once with a sentence saying so (rather than
piling up more stuck threads); :meth:`wedged` says the same to doctor. When the stuck call
returns — space came back, the hang cleared — the store is healthy again, no restart needed.
"""

from __future__ import annotations

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
    thread: threading.Thread
    since: float  # time.monotonic() when the call started


class DeadlineVectorStore:
    """A VectorStore whose every call returns, raises, or fails with STORE_UNAVAILABLE by a deadline."""

    def __init__(self, inner: VectorStore, deadline_s: float) -> None:
        self.inner = inner
        self.deadline_s = deadline_s
        self._stuck: list[_Stuck] = []
        self._lock = threading.Lock()

    # ---- the deadline --------------------------------------------------------------------
    def wedged(self) -> str | None:
        """A sentence when a timed-out call is still running inside the store; None when healthy."""
        with self._lock:
            self._stuck = [s for s in self._stuck if s.thread.is_alive()]
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
        outcome: dict[str, Any] = {}
        finished = threading.Event()

        def run() -> None:
            try:
                outcome["value"] = fn()
            except BaseException as exc:  # handed to the caller's thread below
                outcome["error"] = exc
            finally:
                finished.set()

        started = time.monotonic()
        worker = threading.Thread(target=run, name=f"vector-store-{what}", daemon=True)
        worker.start()
        if not finished.wait(self.deadline_s):
            with self._lock:
                self._stuck.append(_Stuck(what, worker, started))
            raise StoreUnavailableError(
                f"The vector store did not answer a {what} call within {self.deadline_s:g} s "
                "(storage.vector_deadline_s); nothing was written.", wedged=True, deadline_s=self.deadline_s)
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    # ---- the VectorStore Protocol --------------------------------------------------------
    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        self._call("upsert", lambda: self.inner.upsert(tenant, ids, embeddings, documents, metadatas))

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self._call("delete", lambda: self.inner.delete(tenant, ids))

    def query(self, tenant: str, embedding: Sequence[float], n: int,
              where: dict[str, Any] | None = None) -> list[VectorHit]:
        return self._call("query", lambda: self.inner.query(tenant, embedding, n, where))

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
        self.inner.close()


def vector_store_wedged(store: VectorStore) -> str | None:
    """The wedge sentence of a deadline-wrapped store (None for a healthy or unwrapped one)."""
    return store.wedged() if isinstance(store, DeadlineVectorStore) else None


__all__ = ["DeadlineVectorStore", "vector_store_wedged"]
