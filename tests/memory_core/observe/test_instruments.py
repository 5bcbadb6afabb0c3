"""The instruments the domain records into: tallies, the timed writer lock, a call's notes, group commit's."""

from __future__ import annotations

import threading
import time

import anyio
import anyio.to_thread
import pytest

from memory_core.models import AddResult
from memory_core.observe import CallRecord, Tally, TimedRLock, calls, current_call, note_stage, note_wait
from memory_core.observe.tally import SIZES
from memory_core.write.add_rows import PreparedAdd
from memory_core.write.group_commit import GroupCommit


def test_a_tally_counts_each_value_in_the_first_bucket_that_holds_it() -> None:
    tally = Tally((1, 2, 4))
    for value in (0.5, 1, 1.5, 4, 9):
        tally.observe(value)
    snap = tally.snapshot()
    assert snap.bounds == (1.0, 2.0, 4.0, float("inf"))
    assert snap.cumulative == (2, 3, 4, 5) and snap.count == 5 and snap.total == pytest.approx(16.0)


def test_the_writer_lock_tallies_outermost_waits_only_and_says_what_holds_it() -> None:
    lock = TimedRLock()
    with lock, lock:  # re-entrant: one wait counted
        held_s, purpose = lock.held_for()
        assert held_s >= 0 and purpose is None
    assert lock.waits.snapshot().count == 1
    assert lock.held_for() == (0.0, None)
    with lock.holding("repair"):
        assert lock.held_for()[1] == "repair"
    assert lock.held_for() == (0.0, None)


def test_a_wait_for_the_writer_lock_is_noted_on_the_call_that_waited() -> None:
    lock = TimedRLock()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    record = CallRecord("add_memory", "r1")
    token = calls.begin(record)
    try:
        threading.Timer(0.05, release.set).start()
        with lock:
            pass
    finally:
        calls.end(token)
        holder.join(10)
    assert record.waits_ms["writer_lock"] >= 40
    assert lock.waits.snapshot().count == 2


def test_notes_outside_a_call_go_nowhere() -> None:
    assert current_call() is None
    note_wait("writer_lock", 1.0)
    note_stage("recall", {"embed": 1.0})
    assert current_call() is None


@pytest.mark.anyio
async def test_a_worker_thread_notes_on_the_call_that_handed_it_the_work() -> None:
    record = CallRecord("recall", "r2")
    token = calls.begin(record)
    try:
        await anyio.to_thread.run_sync(lambda: note_stage("recall", {"embed": 3.0, "vector": 2.0}))
    finally:
        calls.end(token)
    assert record.stage_op == "recall" and record.stages_ms == {"embed": 3.0, "vector": 2.0}
    assert record.stages_end_ns > record.started_ns


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_group_commit_tallies_its_batch_sizes_and_each_adds_queue_wait() -> None:
    started = threading.Event()

    def write(items: list[PreparedAdd]) -> list[AddResult]:
        started.set()
        time.sleep(0.05)  # later callers queue meanwhile
        return [AddResult(f"mem:{i}", None, None, True) for i, _ in enumerate(items)]  # type: ignore[arg-type]

    batches = GroupCommit(write, batch_max=8, window_s=0.0)
    records = [CallRecord("add_memory", f"r{i}") for i in range(4)]

    def add(record: CallRecord) -> None:
        token = calls.begin(record)
        try:
            batches.add(lambda: PreparedAdd.__new__(PreparedAdd))
        finally:
            calls.end(token)

    first = threading.Thread(target=add, args=(records[0],))
    first.start()
    started.wait(10)
    rest = [threading.Thread(target=add, args=(r,)) for r in records[1:]]
    for t in rest:
        t.start()
    for t in [first, *rest]:
        t.join(10)
    sizes = batches.sizes.snapshot()
    assert sizes.count == 2 and sizes.total == 4 and batches.sizes.bounds == tuple(float(b) for b in SIZES)
    assert batches.queue_waits.snapshot().count == 4
    assert all("group_commit" in r.waits_ms for r in records)
    assert max(r.waits_ms["group_commit"] for r in records[1:]) >= 20  # queued behind the first batch
