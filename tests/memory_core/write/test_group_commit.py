"""Concurrent single adds are written as batches (group commit), each caller keeping its own answer.

The batches are made deterministic with a gated embedder: the first caller leads a batch and
stops inside its embedding call; the callers started meanwhile queue behind it and, once the
gate opens, are written together as the next batch. Every test then checks what a caller of a
lone ``add_memory`` would see: its own ref, idempotency replies, duplicate reports, tenants,
private rows, and both stores in agreement.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import InvalidInputError, MemoryCoreError, StoreError, StoreUnavailableError
from memory_core.models import AddResult
from memory_core.write.group_commit import GroupCommit, row_specific
from tests.support.backends import open_core, store_backends
from tests.support.store_checks import assert_stores_agree

BACKENDS = store_backends("memory", "persistent", "postgres")


class GatedEmbedder(HashEmbedder):
    """A hash embedder whose calls stop at a gate while it is closed; records each call's batch size."""

    def __init__(self) -> None:
        super().__init__()
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        self.entered.set()
        assert self.open.wait(30), "the gate was never opened"
        return super().embed(texts)


@pytest.fixture(params=BACKENDS)
def gated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[MemoryCore, GatedEmbedder]]:
    embedder = GatedEmbedder()
    core = open_core(request.param, tmp_path / "data", request, embedder=embedder)
    yield core, embedder
    core.close()


Outcome = AddResult | MemoryCoreError


def in_one_batch(core: MemoryCore, embedder: GatedEmbedder, calls: list[Callable[[], AddResult]]) -> list[Outcome]:
    """Run ``calls`` from threads of their own so that all of them are written as one batch: a
    first add leads a batch of its own and waits at the gate while the others queue behind it."""
    assert core._writer.batches is not None
    embedder.open.clear()
    embedder.entered.clear()

    def hold() -> None:  # a store made to fail fails this add too; the test is about the batch behind it
        with contextlib.suppress(MemoryCoreError):
            core.add_memory("gate", "s", "a", "holds the gate open")

    first = threading.Thread(target=hold)
    first.start()
    assert embedder.entered.wait(10)
    out: list[Outcome | None] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            out[i] = calls[i]()
        except MemoryCoreError as exc:
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 10
    while core._writer.batches.pending() + sum(isinstance(o, MemoryCoreError) for o in out) < len(calls):
        assert time.monotonic() < deadline, "the callers never queued"
        time.sleep(0.005)
    before = core._writer.batches.stats()["batches"]
    embedder.open.set()
    for t in [first, *threads]:
        t.join(30)
    assert core._writer.batches.stats()["batches"] == before + 1, "the queued adds were not one batch"
    return [o for o in out if o is not None]


def adder(core: MemoryCore, tenant: str, session: str, agent: str, content: str, **kw: Any) -> Callable[[],
                                                                                                       AddResult]:
    return lambda: core.add_memory(tenant, session, agent, content, **kw)


def test_queued_adds_are_written_as_one_batch_with_one_embedding_call(
        gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    results = in_one_batch(core, embedder, [adder(core, "acme", "s1", f"agent{i}", f"turn number {i}")
                                            for i in range(6)])
    assert embedder.calls[-1] == 6  # the batch: one embedding call for the six queued adds
    assert all(isinstance(r, AddResult) and r.created for r in results)
    refs = [r.ref for r in results if isinstance(r, AddResult)]
    assert len(set(refs)) == 6
    got = core.get_contents("acme", refs)  # readable the moment each add returned
    assert not got.missing
    assert {r.ref: r.content for r in got.found} == {ref: f"turn number {i}" for i, ref in enumerate(refs)}
    assert_stores_agree(core)


def test_two_callers_with_one_idempotency_key_in_one_batch_get_one_memory(
        gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    results = in_one_batch(core, embedder, [
        adder(core, "acme", "s1", "a", "first try", idempotency_key="k1"),
        adder(core, "acme", "s1", "a", "second try", idempotency_key="k1"),
        adder(core, "globex", "s1", "a", "another tenant, same key", idempotency_key="k1"),
    ])
    acme = [r for r in results[:2] if isinstance(r, AddResult)]
    assert len(acme) == 2 and acme[0].ref == acme[1].ref
    assert sorted(r.created for r in acme) == [False, True]
    assert all(r.duplicate_of is None for r in acme)
    other = results[2]
    assert isinstance(other, AddResult) and other.created and other.ref != acme[0].ref
    assert core._graph.count("acme") == 1  # one memory for the two calls
    # a later retry answers the same way as the repeat in the batch did
    again = core.add_memory("acme", "s1", "a", "third try", idempotency_key="k1")
    assert (again.ref, again.created, again.duplicate_of) == (acme[0].ref, False, None)
    assert_stores_agree(core)


def test_duplicates_inside_one_batch_are_reported_but_never_reveal_a_private_row(
        gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    results = in_one_batch(core, embedder, [
        adder(core, "acme", "s1", "a", "the deploy is green"),
        adder(core, "acme", "s1", "b", "The deploy is  green"),
        adder(core, "acme", "s2", "c", "secret plan", visibility="agent"),
        adder(core, "acme", "s2", "d", "secret plan"),
        adder(core, "globex", "s1", "a", "the deploy is green"),
    ])
    r = [x for x in results if isinstance(x, AddResult)]
    assert len(r) == 5
    # the batch is written in queue order; whichever of a pair came second is the duplicate
    pair = sorted([r[0], r[1]], key=lambda x: int(x.ref.split(":")[1]))
    assert pair[0].duplicate_of is None and pair[1].duplicate_of == pair[0].ref
    # agent d never learns of agent c's private row (nor c of d's, if d came first: c's row is private)
    assert r[3].duplicate_of is None
    assert r[4].duplicate_of is None  # another tenant's identical row is not a duplicate
    assert_stores_agree(core)


def test_one_callers_bad_input_fails_that_caller_alone(gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    results = in_one_batch(core, embedder, [
        adder(core, "acme", "s1", "a", "fine one"),
        adder(core, "acme", "s1", "a", ""),
        adder(core, "acme", "s1", "a", "fine two", salience=7.0),
        adder(core, "", "s1", "a", "no tenant"),
        adder(core, "acme", "s1", "a", "fine three"),
    ])
    assert [type(r).__name__ for r in results] == [
        "AddResult", "EmptyContentError", "InvalidInputError", "TenantRequiredError", "AddResult"]
    assert all(isinstance(e, InvalidInputError) for e in (results[1], results[2], results[3]))
    assert embedder.calls[-1] == 2
    assert_stores_agree(core)


class RefusingVectors:
    """Delegates to a real vector store, refusing upserts that hold ``poison`` (a row Chroma rejects),
    or every upsert while ``down`` (a store that is unavailable)."""

    def __init__(self, inner: Any, poison: str) -> None:
        self.inner = inner
        self.poison = poison
        self.down = False
        self.upserts: list[int] = []

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Any, documents: Sequence[str],
               metadatas: Any) -> None:
        self.upserts.append(len(ids))
        if self.down:
            raise StoreUnavailableError("The Chroma server is unavailable; nothing was written.")
        if any(self.poison in d for d in documents):
            raise StoreError("The vector store failed (a row it refused).")
        self.inner.upsert(tenant, ids, embeddings, documents, metadatas)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_row_that_fails_its_batch_fails_alone_and_the_others_are_written(
        gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    refusing = RefusingVectors(core._writer.vectors, poison="POISON")
    core._writer.vectors = refusing  # type: ignore[assignment]
    results = in_one_batch(core, embedder, [
        adder(core, "acme", "s1", "a", "good one"),
        adder(core, "acme", "s1", "a", "POISON row"),
        adder(core, "acme", "s1", "a", "good two", idempotency_key="k"),
    ])
    assert isinstance(results[0], AddResult) and isinstance(results[2], AddResult)
    assert isinstance(results[1], StoreError)
    assert core._writer.batches is not None and core._writer.batches.stats()["retried_alone"] == 3
    assert refusing.upserts[-4:] == [3, 1, 1, 1]  # the batch, then each row alone
    got = core.get_contents("acme", [results[0].ref, results[2].ref])
    assert [r.content for r in got.found] == ["good one", "good two"]
    assert_stores_agree(core)  # the refused row left nothing behind, in either store


def test_a_store_failure_is_reported_to_every_caller_of_the_batch_and_nothing_is_written(
        gated: tuple[MemoryCore, GatedEmbedder]) -> None:
    core, embedder = gated
    refusing = RefusingVectors(core._writer.vectors, poison="\x00never")
    core._writer.vectors = refusing  # type: ignore[assignment]
    before = core._graph.count("acme")
    refusing.down = True
    results = in_one_batch(core, embedder, [adder(core, "acme", "s1", "a", f"row {i}") for i in range(4)])
    assert all(isinstance(r, StoreUnavailableError) for r in results)
    assert refusing.upserts[-1] == 4  # tried once as a batch, never row by row
    assert core._graph.count("acme") == before
    refusing.down = False
    assert core.add_memory("acme", "s1", "a", "after the outage").created
    assert_stores_agree(core)


def test_a_lone_caller_leads_at_once_and_waits_for_nobody(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request, write={"coalesce_ms": 500})
    try:
        start = time.perf_counter()
        for i in range(5):
            core.add_memory("acme", "s1", "a", f"alone {i}")
        assert time.perf_counter() - start < 2.0  # a 500 ms window paid five times would be 2.5 s
        assert core._writer.batches is not None
        stats = core._writer.batches.stats()
        assert (stats["batches"], stats["largest"], stats["waited_s"]) == (5, 1, 0.0)
    finally:
        core.close()


def test_batch_max_one_writes_each_add_alone_as_before(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request, write={"batch_max": 1})
    try:
        assert core._writer.batches is None
        assert core.add_memory("acme", "s1", "a", "written alone").created
    finally:
        core.close()


def test_many_threads_adding_at_once_share_batches_and_lose_nothing(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """No gate: 16 threads of 25 adds each, as a fleet of agents would; batches form on their own."""
    core = open_core("persistent", tmp_path / "data", request, write={"batch_max": 8})
    try:
        refs: list[list[str]] = [[] for _ in range(16)]

        def agent(w: int) -> None:
            for n in range(25):
                refs[w].append(core.add_memory("acme", f"s{w % 3}", f"agent{w}", f"agent {w} turn {n}").ref)

        threads = [threading.Thread(target=agent, args=(w,)) for w in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        flat = [r for rs in refs for r in rs]
        assert len(flat) == len(set(flat)) == 400
        assert core._writer.batches is not None
        stats = core._writer.batches.stats()
        assert stats["rows"] == 400 and stats["batches"] < 400 and stats["largest"] <= 8
        views = assert_stores_agree(core)
        assert views["acme"].graph == set(flat)
    finally:
        core.close()


def test_a_leader_waits_within_the_window_only_for_callers_already_preparing() -> None:
    gate = threading.Event()
    written: list[list[str]] = []

    def write(items: list[Any]) -> list[AddResult]:
        written.append([i.row["content"] for i in items])
        return [AddResult(f"mem:{len(written)}{j}", None, None, True) for j in range(len(items))]  # type: ignore[arg-type]

    group = GroupCommit(write, batch_max=8, window_s=5.0)
    item = type("Item", (), {})

    def prepared(text: str, wait: threading.Event | None = None) -> Callable[[], Any]:
        def prepare() -> Any:
            if wait is not None:
                assert wait.wait(10)
            p = item()
            p.row = {"content": text}
            return p
        return prepare

    slow = threading.Thread(target=group.add, args=(prepared("slow", gate),))
    slow.start()  # preparing: a leader that forms a batch now waits for it
    time.sleep(0.05)
    lead = threading.Thread(target=group.add, args=(prepared("lead"),))
    lead.start()
    time.sleep(0.2)
    assert written == []  # the leader is waiting for the caller on its way
    gate.set()
    lead.join(10)
    slow.join(10)
    assert written == [["lead", "slow"]]


def test_only_errors_a_single_row_can_cause_are_retried_row_by_row() -> None:
    from memory_core.errors import EmbeddingError, StoreFullError

    assert row_specific(StoreError("generic"))
    assert row_specific(ValueError("a row chroma refused"))
    assert not row_specific(StoreUnavailableError("down"))
    assert not row_specific(StoreFullError("full"))
    assert not row_specific(EmbeddingError("down", reason="connection refused"))
    assert not row_specific(EmbeddingError("busy", reason="http 429"))
    assert row_specific(EmbeddingError("too long", reason="http 400"))
    assert not row_specific(KeyboardInterrupt())


@pytest.mark.slow
@pytest.mark.postgres
def test_replicas_writing_batches_over_the_same_sessions_in_opposite_orders_never_fail(
        tmp_path: Path, dsn: str) -> None:
    """Two replicas on one PostgreSQL database, each writing batches that span the same sessions (as
    group commit forms them from their own callers), in opposite orders: no batch may fail for a lock
    cycle between the two (a deadlock PostgreSQL breaks by failing one of them)."""
    from memory_core.settings import load_settings

    def replica(name: str) -> MemoryCore:
        settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                        "storage": {"graph": "postgres", "postgres_dsn": dsn}})
        return MemoryCore.open(tmp_path / name, settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)

    cores = [replica("a"), replica("b")]
    failures: list[str] = []
    sessions = [f"s{i}" for i in range(6)]
    start = threading.Barrier(4)

    def write(core: MemoryCore, order: list[str], who: str) -> None:
        start.wait()
        for n in range(30):
            try:
                core.add_memories([{"tenant": "acme", "session": s, "agent": who, "content": f"{who} {n} in {s}"}
                                   for s in order])
            except StoreError as exc:
                failures.append(f"{who} batch {n}: {exc.code} {exc.message}")

    threads = [threading.Thread(target=write, args=(core, order, f"{i}{j}"))
               for i, core in enumerate(cores) for j, order in enumerate((sessions, sessions[::-1]))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert failures == []
        assert cores[0]._graph.count("acme") == 4 * 30 * len(sessions)
    finally:
        for c in cores:
            c.close()


@contextlib.contextmanager
def sigint_raises() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in the main thread for the block, whatever the process inherited."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_caller_interrupted_while_queued_leaves_nothing_behind_and_the_next_caller_still_leads() -> None:
    import os
    import signal

    gate = threading.Event()
    written: list[list[str]] = []

    def write(items: list[Any]) -> list[AddResult]:
        if not written:
            assert gate.wait(10)
        written.append([i.row["content"] for i in items])
        return [AddResult(f"mem:{len(written)}{j}", None, None, True) for j in range(len(items))]  # type: ignore[arg-type]

    group = GroupCommit(write, batch_max=8, window_s=0.0)

    def prepared(text: str) -> Callable[[], Any]:
        def prepare() -> Any:
            p = type("Item", (), {})()
            p.row = {"content": text}
            return p
        return prepare

    leader = threading.Thread(target=group.add, args=(prepared("first"),))
    leader.start()
    deadline = time.monotonic() + 10
    while not group.stats()["batches"]:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    # Ctrl-C while this (main) thread waits in the queue. A process started in the background by a
    # non-interactive shell (`make check &`, a CI script) inherits SIGINT ignored: Python then installs no
    # KeyboardInterrupt handler, so the test installs it for itself
    with sigint_raises():
        threading.Timer(0.2, os.kill, args=(os.getpid(), signal.SIGINT)).start()
        with pytest.raises(KeyboardInterrupt):
            group.add(prepared("interrupted"))
    assert group.pending() == 0  # it left the queue
    gate.set()
    leader.join(10)
    assert group.add(prepared("after")).ref  # someone still leads: no caller hangs
    assert written == [["first"], ["after"]]


def test_a_ctrl_c_the_kernel_hands_to_another_thread_still_interrupts_the_caller_waiting_in_the_queue() -> None:
    """Linux may run a process's SIGINT handler on any thread (the full suite's many threads made it the
    rule under load): Python then raises KeyboardInterrupt in the main thread only when that thread runs
    again, so a caller waiting in the queue without a timeout never saw its Ctrl-C until its batch ended."""
    import signal

    gate = threading.Event()
    written: list[list[str]] = []

    def write(items: list[Any]) -> list[AddResult]:
        if not written:
            gate.wait(10)
        written.append([i.row["content"] for i in items])
        return [AddResult(f"mem:{len(written)}{j}", None, None, True) for j in range(len(items))]  # type: ignore[arg-type]

    group = GroupCommit(write, batch_max=8, window_s=0.0)

    def prepared(text: str) -> Callable[[], Any]:
        def prepare() -> Any:
            p = type("Item", (), {})()
            p.row = {"content": text}
            return p
        return prepare

    leader = threading.Thread(target=group.add, args=(prepared("first"),))
    leader.start()
    deadline = time.monotonic() + 10
    while not group.stats()["batches"]:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    idle = threading.Event()
    bystander = threading.Thread(target=idle.wait)  # the thread the kernel picks for the signal
    bystander.start()
    try:
        with sigint_raises():
            threading.Timer(0.2, signal.pthread_kill, args=(bystander.ident, signal.SIGINT)).start()
            started = time.monotonic()
            with pytest.raises(KeyboardInterrupt):
                group.add(prepared("interrupted"))
        assert time.monotonic() - started < 5  # not when the leader's batch ends (10 s)
        assert group.pending() == 0
    finally:
        idle.set()
        gate.set()
        leader.join(10)
    assert written == [["first"]]


def test_the_callers_of_a_batch_adding_again_at_once_are_written_as_one_batch_again() -> None:
    """A fleet's agents add turn after turn: the first one back waits (within the window) for the others
    of its last batch, rather than writing alone and leaving them a batch of their own."""
    gate = threading.Event()
    written: list[list[str]] = []

    def write(items: list[Any]) -> list[AddResult]:
        if not written:
            assert gate.wait(10)
        written.append(sorted(i.row["content"].split()[0] for i in items))
        return [AddResult(f"mem:{len(written)}{j}", None, None, True) for j in range(len(items))]  # type: ignore[arg-type]

    group = GroupCommit(write, batch_max=8, window_s=0.3)  # the gate's caller never comes back: one wait

    def prepared(text: str) -> Callable[[], Any]:
        def prepare() -> Any:
            p = type("Item", (), {})()
            p.row = {"content": text}
            return p
        return prepare

    def agent(name: str) -> None:
        for turn in range(3):
            group.add(prepared(f"{name} {turn}"))

    first = threading.Thread(target=group.add, args=(prepared("gate 0"),))
    first.start()
    deadline = time.monotonic() + 10
    while not group.stats()["batches"]:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    agents = [threading.Thread(target=agent, args=(n,)) for n in ("a", "b", "c")]
    for t in agents:
        t.start()
    while group.pending() < 3:
        assert time.monotonic() < deadline
        time.sleep(0.005)
    gate.set()
    for t in [first, *agents]:
        t.join(10)
    assert written == [["gate"], ["a", "b", "c"], ["a", "b", "c"], ["a", "b", "c"]]


def test_a_secret_is_redacted_or_refused_for_its_own_caller_alone_inside_a_batch(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """The secrets guard runs while each caller prepares its add: redaction is reported to the caller
    whose text held the secret, and under ``reject`` only that caller is refused."""
    from memory_core.errors import SecretRejectedError
    from testbed.secrets_corpus import Fake

    key = Fake(4242).aws_access_key()
    for policy in ("redact", "reject"):
        embedder = GatedEmbedder()
        core = open_core("persistent", tmp_path / policy, request, embedder=embedder,
                         security={"secrets": policy})
        try:
            results = in_one_batch(core, embedder, [
                adder(core, "acme", "s1", "a", "deploy notes, nothing secret"),
                adder(core, "acme", "s1", "b", f"the key is {key} for the deploy"),
                adder(core, "acme", "s1", "c", "another clean turn"),
            ])
            clean = [results[0], results[2]]
            assert all(isinstance(r, AddResult) and r.created and not r.redacted for r in clean), policy
            if policy == "redact":
                assert isinstance(results[1], AddResult) and results[1].redacted == {"aws-access-key": 1}
                stored = core.get_contents("acme", [results[1].ref]).found[0].content
                assert key not in stored and "[REDACTED:aws-access-key]" in stored
            else:
                assert isinstance(results[1], SecretRejectedError)
                assert embedder.calls[-1] == 2  # the refused add never joined the batch
            assert_stores_agree(core)
        finally:
            core.close()
