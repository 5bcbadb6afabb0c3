"""Group commit: concurrent single adds written as one batch, each caller keeping its own outcome.

Many agents sharing one service each add one turn at a time. Written alone, every add pays a
whole embedding run, a Chroma call and two graph transactions; written together, a batch of them
pays each once. :class:`GroupCommit` gathers them without a timer on the common path:

- a caller first prepares its add in its own thread (validation, entity extraction: see
  :meth:`GroupCommit.add`), so bad input fails that caller alone, before any batch exists;
- the caller that finds no batch in progress *leads*: it writes at once, so a lone caller waits
  for nothing;
- callers arriving while a batch is being written queue up; when it ends, the oldest of them
  leads the next batch (at most ``batch_max`` rows), the rest follow and sleep until it is written;
- a leader waits (at most ``window_s``) only for callers it expects: ones already preparing their
  add when the batch is formed, and, right after a batch ended, that batch's other callers coming
  back with their next add (a fleet's agents add turn after turn: without the wait, a batch of eight
  became batches of one and seven). A lone caller expects nobody and never waits.

A batch is written by the ``write`` callable given (one embedding call, one Chroma upsert per
tenant, one graph transaction: :meth:`memory_core.write.path.WritePath.write_prepared`), so the
semantics of one add are those of a batch: idempotency keys (two callers with one key in one batch
get one memory), duplicate reports, tenants, private rows and the crash guarantee are the write
path's. If a batch of several fails for a reason a single row could cause (:func:`row_specific`),
each of its rows is written again alone, so one bad row fails only its own caller; a failure of
the stores themselves (unavailable, full, read-only) is reported to every caller of the batch, as
the same coded error it would have given each of them alone.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from memory_core.errors import (
    EmbeddingError,
    StoreError,
    StoreFullError,
    StoreLockedError,
    StoreReadOnlyError,
    StoreUnavailableError,
)
from memory_core.models import AddResult
from memory_core.observe import Tally, note_wait
from memory_core.observe.tally import SIZES
from memory_core.write.add_rows import PreparedAdd

BatchWriter = Callable[[list[PreparedAdd]], list[AddResult]]

# failures of the stores or the model themselves: writing the rows one by one would only fail each again
INTERRUPT_CHECK_S = 0.1  # how soon a caller waiting in the queue sees a Ctrl-C handled on another thread
_SHARED_FAILURES = (StoreUnavailableError, StoreFullError, StoreReadOnlyError, StoreLockedError)
_REQUEST_ERRORS = frozenset({400, 413, 422})  # a provider refusing the input (one text may be the cause)


def row_specific(exc: BaseException) -> bool:
    """Whether one row of a failed batch may alone be the cause (so the others are worth retrying alone).

    Not when a store is unavailable, full or read-only, nor when the embedding provider is down or
    times out: every row would fail the same way, and retrying them one by one would multiply the wait.
    """
    if not isinstance(exc, Exception):
        return False  # KeyboardInterrupt, SystemExit: stop, do not retry
    if isinstance(exc, _SHARED_FAILURES):
        return False
    if isinstance(exc, EmbeddingError):
        reason = str(exc.fields.get("reason", ""))
        return reason.startswith("http ") and reason[5:].isdigit() and int(reason[5:]) in _REQUEST_ERRORS
    return True  # any other store error or an unexpected one (a row Chroma refused): try each alone


@dataclass(eq=False)
class _Ticket:
    """One caller's add, waiting in the queue or being written."""

    item: PreparedAdd
    result: AddResult | None = None
    error: BaseException | None = None
    lead: bool = False  # this caller writes the next batch
    returning: int = 0  # made leader as a batch of this many ended: its callers may be back in a moment
    wake: threading.Event = field(default_factory=threading.Event)
    queued: float = field(default_factory=time.perf_counter)
    waited: float = 0.0  # seconds from queued to taken into a batch (metrics, the call's trace)

    def outcome(self) -> AddResult:
        if self.error is not None:
            raise self.error  # as concurrent.futures does: each waiting caller raises the batch's error
        assert self.result is not None
        return self.result


@dataclass
class BatchStats:
    """What the batches have been: for operators (how much coalescing happens) and benchmarks."""

    batches: int = 0
    rows: int = 0
    largest: int = 0
    retried_alone: int = 0  # rows written again alone after their batch failed for a row's reason
    waited_s: float = 0.0  # the leaders' total wait for callers on their way (the window)

    def as_dict(self) -> dict[str, float]:
        mean = self.rows / self.batches if self.batches else 0.0
        return {"batches": self.batches, "rows": self.rows, "largest": self.largest, "mean": round(mean, 2),
                "retried_alone": self.retried_alone, "waited_s": round(self.waited_s, 4)}


class GroupCommit:
    """Leader/follower batching of single adds (see the module docstring)."""

    def __init__(self, write: BatchWriter, *, batch_max: int, window_s: float) -> None:
        if batch_max < 2:
            raise ValueError("group commit needs batch_max >= 2 (1 means: write each add alone)")
        self._write = write
        self._batch_max = batch_max
        self._window_s = window_s
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[_Ticket] = []
        self._busy = False  # a leader is gathering or writing a batch
        self._preparing = 0  # callers inside add() that have not queued yet
        self._ended = -math.inf  # time.monotonic() when the last batch was written
        self._returning = 0  # callers of that batch, if nobody was queued behind it (they may be back at once)
        self._stats = BatchStats()
        self.sizes, self.queue_waits = Tally(SIZES), Tally()  # read by /metrics (memory_core.observe)

    def stats(self) -> dict[str, float]:
        with self._cond:
            return self._stats.as_dict()

    def pending(self) -> int:
        """Adds waiting for a batch (not yet in the one being written)."""
        with self._cond:
            return len(self._queue)

    def add(self, prepare: Callable[[], PreparedAdd]) -> AddResult:
        """Prepare one add in this thread (its errors are this caller's alone), then write it in a batch."""
        with self._cond:
            self._preparing += 1
        try:
            item = prepare()
        except BaseException:
            with self._cond:
                self._preparing -= 1
                self._cond.notify_all()  # a leader waiting for this caller need not wait any more
            raise
        return self._submit(item)

    def _submit(self, item: PreparedAdd) -> AddResult:
        ticket = _Ticket(item)
        with self._cond:
            self._preparing -= 1
            self._queue.append(ticket)
            if self._busy:
                self._cond.notify_all()  # a leader gathering its batch may be waiting for this one
            else:
                self._busy = True
                ticket.lead = True
                # the first of a batch's callers back leads; it expects the others (and only them)
                ticket.returning, self._returning = max(0, self._returning - 1), 0
        try:
            # until written by a leader, or made the next leader; in slices, because a Ctrl-C whose handler
            # the kernel ran on another thread reaches this thread only when it runs Python code again
            if not ticket.lead:
                while not ticket.wake.wait(INTERRUPT_CHECK_S):
                    pass
            batch = self._gather(ticket.returning) if ticket.lead else None
        except BaseException:  # interrupted (KeyboardInterrupt) before its add was taken into a batch
            self._withdraw(ticket)
            raise
        if batch is not None:
            self._lead(batch)
        note_wait("group_commit", ticket.waited)
        return ticket.outcome()

    def _withdraw(self, ticket: _Ticket) -> None:
        """An interrupted caller's add leaves the queue unwritten; if it was to lead, the next one leads.
        (One already in a batch is written without its caller, as any interrupted call may be.)"""
        with self._cond:
            if ticket not in self._queue:
                return
            self._queue.remove(ticket)
            if not ticket.lead:
                return
            ticket.lead = False
            nxt = self._queue[0] if self._queue else None
            if nxt is None:
                self._busy = False
            else:
                nxt.lead = True
        if nxt is not None:
            nxt.wake.set()

    def _gather(self, returning: int) -> list[_Ticket]:
        """The leader's batch: the queue's oldest adds (its own first), after waiting — at most the window —
        for callers on their way: ones already preparing their add (up to the window from now), and the
        ``returning`` callers of the batch that just ended (up to the window from its end). A fleet's agents
        add turn after turn, so they come back at once; without the wait a batch of eight became batches
        of one and seven, and one batch costs less than two (a Chroma call and a graph transaction each)."""
        with self._cond:
            now = time.monotonic()
            prepared_by, returned_by = now + self._window_s, self._ended + self._window_s
            target = min(self._batch_max, len(self._queue) + returning)
            waited = 0.0
            while len(self._queue) < self._batch_max:
                now = time.monotonic()
                waits = [prepared_by] if self._preparing and now < prepared_by else []
                if len(self._queue) < target and now < returned_by:
                    waits.append(returned_by)
                if not waits:
                    break
                self._cond.wait(max(waits) - now)
                waited += time.monotonic() - now
            batch = self._queue[: self._batch_max]
            del self._queue[: self._batch_max]
            taken = time.perf_counter()
            for t in batch:
                t.waited = taken - t.queued
                self.queue_waits.observe(t.waited)
            self.sizes.observe(len(batch))
            self._stats.batches += 1
            self._stats.rows += len(batch)
            self._stats.largest = max(self._stats.largest, len(batch))
            self._stats.waited_s += waited
            return batch

    def _lead(self, batch: list[_Ticket]) -> None:
        """Write the batch, then wake its callers and hand the lead to the oldest add still queued."""
        try:
            self._write_batch(batch)
        finally:
            with self._cond:
                self._ended = time.monotonic()
                nxt = self._queue[0] if self._queue else None
                if nxt is None:
                    self._busy = False
                    self._returning = len(batch)
                else:
                    nxt.lead = True
                    nxt.returning, self._returning = len(batch), 0
            for t in batch:
                if t.result is None and t.error is None:  # only when an interrupt stopped the retries
                    t.error = StoreError("The write of this memory was interrupted; it may or may not be "
                                         "stored. Retry it (with an idempotency_key a retry is safe).")
                t.lead = False
                t.wake.set()
            if nxt is not None:
                nxt.wake.set()

    def _write_batch(self, batch: list[_Ticket]) -> None:
        """Each ticket gets its result or its error; only a non-Exception (an interrupt) propagates."""
        try:
            results = self._write([t.item for t in batch])
        except BaseException as exc:
            if len(batch) == 1 or not row_specific(exc):
                for t in batch:
                    t.error = exc
                if not isinstance(exc, Exception):
                    raise
                return
            self._retry_alone(batch)
            return
        for t, r in zip(batch, results, strict=True):
            t.result = r

    def _retry_alone(self, batch: list[_Ticket]) -> None:
        """The batch failed (and was undone) for a reason one row may cause: each row alone, in order."""
        with self._cond:
            self._stats.retried_alone += len(batch)
        for t in batch:
            try:
                t.result = self._write([t.item])[0]
            except Exception as exc:  # this row's own outcome, whatever it is, goes to its caller alone
                t.error = exc


__all__ = ["BatchStats", "GroupCommit", "row_specific"]
