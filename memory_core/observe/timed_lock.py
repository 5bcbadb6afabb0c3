"""The writer lock, timed: how long each acquire waited, and what holds it for long.

:class:`TimedRLock` is a re-entrant lock (the write path's, shared by every writer of a store) that
tallies the wait of each outermost acquire (``/metrics``: writer-lock waits) and notes it on the
tool call in progress (its log line and trace). A holder that keeps it for a long job says what it
is (:meth:`TimedRLock.holding`: a doctor check or repair), so ``/readyz`` can answer "not ready:
repair" instead of letting a load balancer send writes that would wait behind it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from memory_core.observe.calls import note_wait
from memory_core.observe.tally import Tally


class TimedRLock:
    """``threading.RLock`` with its waits tallied and its long holders named."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._depth = 0  # the owner's nesting (only the owner reads or writes it)
        self.waits = Tally()
        self.held_since: float | None = None  # time.monotonic() of the outermost acquire
        self.purpose: str | None = None  # what a long holder said it is doing

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        started = time.perf_counter()
        if not self._lock.acquire(blocking, timeout):
            return False
        self._depth += 1
        if self._depth == 1:
            waited = time.perf_counter() - started
            self.held_since = time.monotonic()
            self.waits.observe(waited)
            note_wait("writer_lock", waited)
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.held_since = None
            self.purpose = None
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()

    @contextmanager
    def holding(self, purpose: str) -> Iterator[None]:
        """Hold the lock for a long job named ``purpose`` (e.g. ``"repair"``): readiness reports it."""
        with self:
            outer, self.purpose = self.purpose, purpose
            try:
                yield
            finally:
                self.purpose = outer

    def held_for(self) -> tuple[float, str | None]:
        """Seconds the current holder has held the lock (0.0 when free) and what it said it is doing."""
        since, purpose = self.held_since, self.purpose
        return (0.0 if since is None else time.monotonic() - since), purpose
