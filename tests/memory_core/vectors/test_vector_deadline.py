"""A hung vector store fails calls with STORE_UNAVAILABLE by a deadline and never freezes the server.

The hang is injected at the vector-store boundary (tests/support/faults.py's
HangingVectorStore blocks upserts or deletes until released, as embedded Chroma's futex
waits did on a full disk), over the in-memory store and over real embedded Chroma.
Each test checks: the call returns by the deadline with a coded error, the writer lock is
free, reads keep answering, later writes say the store is wedged (and doctor says so) while
the stuck call has not returned, and once it returns writes work again without a restart
and nothing is left half-written.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import StoreUnavailableError
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.settings import load_settings
from memory_core.vectors.chroma import ChromaVectorStore
from memory_core.vectors.deadline import vector_store_wedged
from memory_core.vectors.memory import InMemoryVectorStore
from tests.support.backends import store_backends
from tests.support.faults import HangingVectorStore
from tests.support.store_checks import assert_stores_agree, journal_rows

DEADLINE_S = 0.5
RETURNS_WITHIN_S = 30.0  # a generous bound: the point is that the call returns at all


class Store:
    """A data directory whose vector store can hang; reopenable over the same inner store."""

    def __init__(self, data_dir: Path, backend: str) -> None:
        self.data_dir = data_dir
        self.backend = backend
        self.settings = load_settings(environ={}, overrides={
            "storage": {"vector_deadline_s": DEADLINE_S}, "embedding": {"provider": "hash"}})
        self._memory = InMemoryVectorStore()
        self.vectors = self._wrap()
        self.core = self.open()

    def _wrap(self) -> HangingVectorStore:
        inner = self._memory if self.backend == "memory" else ChromaVectorStore.persistent(self.data_dir / "chroma")
        return HangingVectorStore(inner)

    def open(self) -> MemoryCore:
        return MemoryCore.open(self.data_dir, settings=self.settings, embedder=HashEmbedder(),
                               vector_store=self.vectors)

    def reopen(self) -> MemoryCore:
        self.core.close()
        self.vectors = self._wrap()
        self.core = self.open()
        return self.core


@pytest.fixture(params=store_backends("memory", "persistent"))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "data", str(request.param))
    yield s
    s.vectors.release()
    s.core.close()


def returns(fn: Callable[[], Any]) -> Any:
    """Run ``fn`` on a thread; fail the test if it never returns (the bug: a frozen server)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed back to the test below
            outcome["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(RETURNS_WITHIN_S)
    assert not worker.is_alive(), "the call never returned: a hung vector store froze it"
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def wait_until_healthy(core: MemoryCore) -> None:
    """The stuck call was released: wait (briefly) until its thread has returned."""
    for _ in range(600):
        if vector_store_wedged(core._vectors) is None:
            return
        threading.Event().wait(0.05)
    raise AssertionError("the released call never returned")


def refused(fn: Callable[[], Any]) -> MemoryCoreError:
    with pytest.raises(MemoryCoreError) as info:
        returns(fn)
    assert info.value.code == "STORE_UNAVAILABLE", info.value.message
    return info.value


def seed(core: MemoryCore) -> set[str]:
    return {core.add_memory("acme", "s1", "alice", text).ref for text in ("apples in the orchard", "pears later")}


@pytest.mark.slow
def test_a_hung_upsert_fails_the_add_by_the_deadline_and_frees_the_writer_lock(store: Store) -> None:
    core = store.core
    refs = seed(core)
    store.vectors.hang_upserts = True
    error = refused(lambda: core.add_memory("acme", "s1", "alice", "lost in the hang"))
    assert "storage.vector_deadline_s" in error.message and error.fields["wedged"] is True
    assert core._writer.lock.acquire(timeout=5), "the writer lock is still held after the deadline"
    core._writer.lock.release()
    assert {f"mem:{i}" for i in core._graph.memory_ids("acme")} == refs  # nothing reached the graph


@pytest.mark.slow
def test_while_a_call_is_stuck_every_write_says_the_store_is_wedged_and_reads_keep_answering(store: Store) -> None:
    core = store.core
    refs = seed(core)
    threads_before = threading.active_count()  # other tests' threads may still be winding down
    store.vectors.hang_upserts = True
    refused(lambda: core.add_memory("acme", "s1", "alice", "lost in the hang"))
    calls = store.vectors.upsert_calls
    for attempt in range(3):
        error = refused(lambda n=attempt: core.add_memory("acme", "s1", "alice", f"refused {n}"))
        assert "wedged" in error.message and error.fields["wedged"] is True
    assert store.vectors.upsert_calls == calls, "a wedged store was called again: stuck threads pile up"
    assert threading.active_count() - threads_before < 10
    assert {r.ref for r in returns(lambda: core.get_contents("acme", sorted(refs))).found} == refs
    assert len(returns(lambda: core.query_recent_turns("acme", "s1")).turns) == 2
    result = returns(lambda: core.recall("acme", "apples orchard"))
    assert [m.ref for m in result.messages][:1] == [min(refs)]  # lexical recall still answers
    assert result.diagnostics["vector_search"].startswith("unavailable")
    report = returns(lambda: check_stores(core.operator_parts()))
    assert [f.kind for f in report.findings] == ["vector_store_wedged"] and not report.ok
    assert [f.kind for f in returns(lambda: repair_stores(core.operator_parts())).remaining] == ["vector_store_wedged"]


@pytest.mark.slow
def test_once_the_hang_clears_writes_work_again_and_the_refused_add_leaves_nothing(store: Store) -> None:
    core = store.core
    refs = seed(core)
    store.vectors.hang_upserts = True
    refused(lambda: core.add_memory("acme", "s1", "alice", "lost in the hang"))
    store.vectors.release()  # the stuck upsert now returns: Chroma holds a record of a refused add
    wait_until_healthy(core)
    refs.add(returns(lambda: core.add_memory("acme", "s1", "alice", "after the hang")).ref)
    assert journal_rows(core) == []  # the next write cleaned up what the refused add left
    assert_stores_agree(core, {"acme": refs})
    assert check_stores(core.operator_parts()).ok
    assert_stores_agree(store.reopen(), {"acme": refs})


@pytest.mark.slow
def test_a_hung_undo_keeps_the_journal_entry_and_a_later_write_finishes_it(store: Store) -> None:
    core = store.core
    refs = seed(core)
    store.vectors.upsert_error = StoreUnavailableError("down")
    store.vectors.hang_deletes = True  # the undo of the failed add hangs too
    refused(lambda: core.add_memory("acme", "s1", "alice", "refused"))
    assert len(journal_rows(core)) == 1  # recovery's to finish, nothing visible meanwhile
    assert {f"mem:{i}" for i in core._graph.memory_ids("acme")} == refs
    store.vectors.clear()
    store.vectors.release()
    wait_until_healthy(core)
    refs.add(returns(lambda: core.add_memory("acme", "s1", "alice", "after")).ref)
    assert journal_rows(core) == []
    assert_stores_agree(core, {"acme": refs})


@pytest.mark.slow
def test_a_hung_vector_delete_hides_the_memory_and_finishes_once_the_store_answers(store: Store) -> None:
    core = store.core
    refs = seed(core)
    victim = min(refs)
    store.vectors.hang_deletes = True
    assert returns(lambda: core.delete_memory("acme", victim)) is True
    assert core.get_contents("acme", [victim]).missing == [victim]
    store.vectors.release()
    wait_until_healthy(core)
    refs.discard(victim)
    refs.add(returns(lambda: core.add_memory("acme", "s1", "alice", "after")).ref)
    assert journal_rows(core) == []
    assert_stores_agree(core, {"acme": refs})


@pytest.mark.slow
def test_recovery_at_open_against_a_hung_store_fails_with_a_code_and_releases_the_directory(
    store: Store,
) -> None:
    core = store.core
    seed(core)
    store.vectors.upsert_error = StoreUnavailableError("down")
    store.vectors.delete_error = StoreUnavailableError("down")
    refused(lambda: core.add_memory("acme", "s1", "alice", "leaves a journal row"))
    core.close()
    store.vectors.clear()
    store.vectors.hang_deletes = True
    refused(store.open)  # recovery's delete hangs: open fails by the deadline, with a code
    store.vectors.release()
    store.core = store.open()  # the failed open released the data directory
    assert journal_rows(store.core) == []
    assert_stores_agree(store.core)


def test_closing_a_store_ends_its_vector_call_workers(tmp_path: Path) -> None:
    def workers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "vector-store-call")

    before = workers()
    for i in range(5):
        core = MemoryCore.open(tmp_path / f"d{i}", embedder=HashEmbedder(16), in_memory_vectors=True)
        core.add_memory("acme", "s1", "alice", "a call that starts a worker")
        core.recall("acme", "worker")
        core.close()
    deadline = threading.Event()
    for _ in range(50):  # workers leave as soon as they see the close; give them a moment
        if workers() <= before:
            break
        deadline.wait(0.05)
    assert workers() <= before
