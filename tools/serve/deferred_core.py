"""How a serving process opens its stores: before it serves, or right after it answers.

:func:`open_core` opens them on a worker thread before the transport starts (``serve --http``,
``serve --exclusive``); the server gets them as :class:`tools.mcp.stores.OpenedCore`.

The shared background server (``serve --http --shared``) claims its data directory's lock
first (milliseconds: STORE_LOCKED still fails its start, and reaches the launching client as
the answer to its ``initialize``), then announces itself and answers ``initialize`` and
``tools/list`` at once, while :class:`DeferredCore` opens the stores (graph, crash recovery,
embedder) on a worker thread. A tool call waits for the open, at most ``OPEN_WAIT_S``
(STORE_UNAVAILABLE after that; the open goes on). An open that fails has released the lock and
answers the calls waiting for it with its own coded error (STORE_ERROR, CONFIG_INVALID, …); the
next call tries again, so a store repaired meanwhile serves without restarting any client.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from memory_core import DirLock, MemoryCoreError, StoreError, StoreLockedError, StoreUnavailableError, claim_data_dir
from tools.server_record import ANNOUNCEMENT

if TYPE_CHECKING:
    from memory_core import MemoryCore, Settings

OPEN_WAIT_S = 60.0  # as long as a launch waited for the whole server to start before the open was deferred
log = logging.getLogger(__name__)


@dataclass
class _Attempt:
    lock: DirLock | None
    done: anyio.Event = field(default_factory=anyio.Event)
    core: MemoryCore | None = None
    error: MemoryCoreError | None = None


class DeferredCore:
    """Stores that open in the background once :meth:`begin` is called (see the module docstring).

    ``open_core(lock)`` opens them: with the lock claimed at start for the first attempt, with
    None (claim it again) for a retry. ``on_open`` runs once they are open (the warm-up); it may be set
    until :meth:`begin`.
    """

    def __init__(self, open_core: Callable[[DirLock | None], MemoryCore], lock: DirLock | None, *,
                 on_open: Callable[[MemoryCore], object] | None = None, wait_s: float = OPEN_WAIT_S) -> None:
        self._open_core = open_core
        self._claimed = lock
        self.on_open = on_open
        self._wait_s = wait_s
        self._mutex = threading.Lock()
        self._core: MemoryCore | None = None
        self._attempt: _Attempt | None = None
        self._closed = False
        self._tasks: TaskGroup | None = None
        self.last_error: MemoryCoreError | None = None  # the last open's failure, until one succeeds (/readyz)

    def bind(self, tasks: TaskGroup) -> None:
        """The task group that runs the opens (the server's own: they end with it)."""
        self._tasks = tasks

    def begin(self) -> None:
        """Start opening now (the server listens and has announced itself)."""
        if self._core is None and self._attempt is None:
            self._start_attempt()

    async def get(self) -> MemoryCore:
        if self._core is not None:
            return self._core
        attempt = self._attempt or self._start_attempt()
        with anyio.move_on_after(self._wait_s):
            await attempt.done.wait()
        if attempt.core is not None:
            return attempt.core
        if attempt.error is not None:
            raise attempt.error
        raise StoreUnavailableError(
            f"The stores are still opening after {self._wait_s:g} s (a large store, or one recovering from a "
            "crash); retry the call shortly.")

    def peek(self) -> MemoryCore | None:
        """The stores if they are open, without waiting or starting an open (``/readyz``)."""
        return self._core

    async def close(self) -> None:
        """Close the stores; an open still running closes what it opens as soon as it is done."""
        with self._mutex:
            self._closed = True
            core, self._core = self._core, None
        if core is not None:
            await anyio.to_thread.run_sync(core.close)

    # ---- one attempt -----------------------------------------------------------------------
    def _start_attempt(self) -> _Attempt:
        if self._tasks is None:
            raise StoreUnavailableError("The server is not serving yet; retry the call shortly.")
        attempt = _Attempt(self._claimed)
        self._claimed = None  # a retry claims the lock itself
        self._attempt = attempt
        self._tasks.start_soon(self._run, attempt)
        return attempt

    async def _run(self, attempt: _Attempt) -> None:
        try:
            # not abandoned on cancel: a shutdown waits for the open, whose result _open_into keeps
            await anyio.to_thread.run_sync(self._open_into, attempt)
        finally:
            if attempt.core is not None:
                self._core = attempt.core
            self.last_error = attempt.error
            self._attempt = None  # after a failure, the next call tries again
            attempt.done.set()
        if attempt.core is not None and self.on_open is not None:
            self.on_open(attempt.core)

    def _open_into(self, attempt: _Attempt) -> None:
        try:
            core = self._open_core(attempt.lock)
        except MemoryCoreError as exc:
            attempt.error = exc
            return
        except Exception:  # top of a background open: a bug is logged and answered, not lost
            log.exception("opening the stores failed unexpectedly")
            attempt.error = StoreError("Opening the stores failed unexpectedly; the server log has the details.")
            if attempt.lock is not None:
                attempt.lock.release()  # idempotent: MemoryCore.open may have released it already
            return
        with self._mutex:
            if not self._closed:
                attempt.core = core
                return
        core.close()  # the server stopped while the stores opened


def open_stores(settings: Settings, data_dir: str | Path | None, lock: DirLock | None = None) -> MemoryCore:
    """Open the stores (blocking); STORE_LOCKED names the announced server that holds them."""
    from memory_core import MemoryCore  # under the heavy packages' import lock, beside a warm-up (see memory_core)

    return MemoryCore.open(data_dir, settings=settings, lock=lock, announcement=ANNOUNCEMENT)


def open_stores_warming(settings: Settings, data_dir: str | Path | None, lock: DirLock | None = None) -> MemoryCore:
    """The shared server's background open: the local model starts loading beside the graph, not after it."""
    if settings.embedding.provider == "minilm":
        from memory_core import shared_minilm, warm_up_in_background

        warm_up_in_background(shared_minilm(settings.embedding.threads))  # the store's embedder: this instance
    return open_stores(settings, data_dir, lock)


async def open_core(settings: Settings, data_dir: str | None) -> MemoryCore:
    """Open the stores on a worker thread (loading a model or recovering may take a while)."""
    return await anyio.to_thread.run_sync(lambda: open_stores(settings, data_dir))


async def claim_when_free(settings: Settings, data_dir: str | None, wait_s: float = 5.0) -> DirLock:
    """Claim the data directory, waiting while a shared server that is stopping still holds it."""
    root = data_dir if data_dir is not None else settings.storage.data_dir
    deadline = anyio.current_time() + wait_s
    while True:
        try:
            return claim_data_dir(root, announcement=ANNOUNCEMENT)
        except StoreLockedError:
            if anyio.current_time() >= deadline:
                raise
            await anyio.sleep(0.2)
