"""The embedded Chroma's loaded indexes under a memory budget (memory_core/vectors/cache.py).

Over real embedded Chroma: a tenant that would take the estimate past the budget releases the
loaded indexes first, and every row written before, between and after releases is still found.
Over a fake (the in-memory store with a release that records when it ran): a release never runs
while a call is in flight, waits a bounded time for one, and a lone tenant bigger than the budget
is never released for its own sake.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import ConfigError
from memory_core.settings import load_settings
from memory_core.vectors import chroma as vector_store
from memory_core.vectors.cache import ROW_OVERHEAD, VectorCacheBudget
from memory_core.vectors.chroma import ChromaVectorStore
from memory_core.vectors.memory import InMemoryVectorStore

DIM = 16
ROW = 4 * DIM + ROW_OVERHEAD


def vectors(n: int, seed: int) -> list[list[float]]:
    return np.random.default_rng(seed).standard_normal((n, DIM)).tolist()  # type: ignore[no-any-return]


def fill(store: VectorCacheBudget, tenant: str, n: int, seed: int) -> list[list[float]]:
    vecs = vectors(n, seed)
    store.upsert(tenant, [f"mem:{i}" for i in range(n)], vecs, [f"{tenant} row {i}" for i in range(n)],
                 [{"kind": "memory"}] * n)
    return vecs


@pytest.fixture
def chroma(tmp_path: Path) -> ChromaVectorStore:
    return ChromaVectorStore.persistent(tmp_path / "chroma")


def test_a_tenant_past_the_budget_releases_the_loaded_indexes_and_every_row_is_still_found(
        chroma: ChromaVectorStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="memory_core.vectors.cache")
    store = VectorCacheBudget(chroma, 60 * ROW, chroma.count)  # room for one tenant of 40 rows, not two
    written = {t: fill(store, t, 40, seed) for seed, t in enumerate(("acme", "beta"))}
    assert store.releases == 1  # beta's first write released acme's index
    assert chroma.resets == 1
    assert "released 1 tenants' indexes" in caplog.text  # what an operator sees of it
    for tenant in ("acme", "beta", "acme", "beta"):  # each switch loads the other tenant back
        for i in (0, 17, 39):
            assert store.query(tenant, written[tenant][i], 1)[0].id == f"mem:{i}"
        assert store.count(tenant) == 40
    assert store.releases == 5  # one a switch: beta → acme → beta → acme → beta
    assert store.loaded_bytes() == 40 * ROW


def test_a_release_hands_the_freed_heap_back(chroma: ChromaVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    trims: list[int] = []
    monkeypatch.setattr(vector_store, "release_freed_heap", lambda: trims.append(chroma.resets))
    store = VectorCacheBudget(chroma, 60 * ROW, chroma.count)
    fill(store, "acme", 40, 1)
    assert trims == []
    fill(store, "beta", 40, 2)
    assert trims == [1]  # after the client was rebuilt


def test_tenants_that_fit_are_never_released(chroma: ChromaVectorStore) -> None:
    store = VectorCacheBudget(chroma, 200 * ROW, chroma.count)
    for seed, tenant in enumerate(("acme", "beta", "gamma")):
        fill(store, tenant, 40, seed)
        store.query(tenant, vectors(1, 99)[0], 3)
    assert store.releases == 0 and chroma.resets == 0
    assert store.loaded_bytes() == 120 * ROW


@pytest.mark.slow
def test_writes_interleaved_across_many_releases_lose_nothing(chroma: ChromaVectorStore) -> None:
    store = VectorCacheBudget(chroma, 30 * ROW, chroma.count)
    tenants = ("acme", "beta", "gamma")
    written: dict[str, list[list[float]]] = {t: [] for t in tenants}
    for rnd in range(6):
        for k, tenant in enumerate(tenants):
            vecs = vectors(5, 100 * rnd + k)
            ids = [f"mem:{len(written[tenant]) + j}" for j in range(5)]
            store.upsert(tenant, ids, vecs, ids, [{"kind": "memory"}] * 5)
            written[tenant] += vecs
    assert store.releases >= 5
    for tenant in tenants:
        assert store.all_ids(tenant) == {f"mem:{i}" for i in range(30)}
        assert all(store.query(tenant, v, 1)[0].id == f"mem:{i}" for i, v in enumerate(written[tenant]))


def test_a_lone_tenant_bigger_than_the_budget_stays_loaded(chroma: ChromaVectorStore) -> None:
    store = VectorCacheBudget(chroma, 10 * ROW, chroma.count)
    vecs = fill(store, "acme", 40, 1)
    for v in vecs[:10]:
        store.query("acme", v, 1)
    assert store.releases == 0 and chroma.resets == 0


class Recording(InMemoryVectorStore):
    """The in-memory store, with queries that can be held and a release that records what ran meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.running = 0
        self.released_while_running: list[int] = []
        self.released = 0

    def query(self, tenant, embedding, n, where=None, ids=None):  # type: ignore[no-untyped-def]
        self.running += 1
        self.entered.set()
        try:
            self.hold.wait()
            return super().query(tenant, embedding, n, where, ids)
        finally:
            self.running -= 1

    def release_indexes(self) -> bool:
        self.released_while_running.append(self.running)
        self.released += 1
        return True


def held_query(drain_s: float) -> tuple[Recording, VectorCacheBudget, threading.Thread]:
    """A store with room for one 40-row tenant, acme loaded, and a query on acme held in flight."""
    inner = Recording()
    store = VectorCacheBudget(inner, 60 * ROW, inner.count, drain_s=drain_s)
    fill(store, "acme", 40, 1)
    inner.hold.clear()
    slow = threading.Thread(target=store.query, args=("acme", vectors(1, 5)[0], 1))
    slow.start()
    assert inner.entered.wait(5)
    return inner, store, slow


def test_a_release_waits_for_the_call_in_flight() -> None:
    inner, store, slow = held_query(drain_s=10.0)
    writer = threading.Thread(target=fill, args=(store, "beta", 40, 2))
    writer.start()
    time.sleep(0.3)
    assert inner.released == 0 and writer.is_alive()  # beta needs room: it waits for acme's query
    inner.hold.set()
    slow.join(5)
    writer.join(5)
    assert inner.released == 1 and inner.released_while_running == [0]
    assert store.count("beta") == 40


def test_a_call_that_outlasts_the_drain_leaves_the_indexes_loaded_and_stalls_no_later_call(
        caplog: pytest.LogCaptureFixture) -> None:
    inner, store, slow = held_query(drain_s=0.2)
    started = time.monotonic()
    fill(store, "beta", 40, 2)  # served after the drain gave up, with nothing released
    assert time.monotonic() - started < 5
    started = time.monotonic()
    for seed in range(10):  # past the budget too, but the call that stalled the release still runs
        fill(store, ("gamma", "delta")[seed % 2], 4, 10 + seed)
    assert time.monotonic() - started < 1.0  # ten waits of 0.2 s would take 2 s
    assert caplog.text.count("ran past") == 1
    assert inner.released == 0
    inner.hold.set()
    slow.join(5)
    fill(store, "epsilon", 40, 3)
    assert inner.released == 1 and inner.released_while_running == [0]
    assert store.loaded_bytes() == 40 * ROW


@pytest.mark.slow
def test_settings_build_the_budget_over_embedded_chroma_and_recall_stays_right_across_releases(
        tmp_path: Path) -> None:
    settings = load_settings(environ={"MEMORY_CORE_STORAGE_VECTOR_CACHE_MB": "1"},
                             overrides={"embedding": {"provider": "hash"}})
    core = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder())
    try:
        rows = (1 << 20) // (4 * 64 + ROW_OVERHEAD) // 2 + 50  # two tenants overflow 1 MB
        for tenant in ("acme", "beta", "gamma"):
            for start in range(0, rows, 200):
                core.add_memories([{"tenant": tenant, "session": "s", "agent": "a",
                                    "content": f"{tenant} note {i} about topic{i}"}
                                   for i in range(start, min(rows, start + 200))])
        budget = core._vectors.inner.inner.open()  # type: ignore[attr-defined]
        assert isinstance(budget, VectorCacheBudget)
        assert budget.releases >= 2
        for tenant in ("acme", "beta", "gamma", "acme"):
            top = core.recall(tenant, f"{tenant} note 7 about topic7", limit=3).messages
            assert top and top[0].content == f"{tenant} note 7 about topic7"
    finally:
        core.close()


def test_a_negative_budget_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"MEMORY_CORE_STORAGE_VECTOR_CACHE_MB": "-1"})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "storage.vector_cache_mb"


@pytest.mark.slow
def test_concurrent_writers_and_readers_across_releases_see_every_row(chroma: ChromaVectorStore) -> None:
    """Four threads write and read three tenants at once with room for about one: releases happen
    between their calls, never under one, and every row each thread wrote is there at the end."""
    store = VectorCacheBudget(chroma, 50 * ROW, chroma.count)
    errors: list[BaseException] = []
    written: dict[tuple[str, str], list[float]] = {}
    lock = threading.Lock()

    def work(worker: int) -> None:
        try:
            for rnd in range(8):
                tenant = ("acme", "beta", "gamma")[(worker + rnd) % 3]
                vecs = vectors(4, 1000 * worker + rnd)
                ids = [f"mem:{worker}-{rnd}-{j}" for j in range(4)]
                store.upsert(tenant, ids, vecs, ids, [{"kind": "memory"}] * 4)
                with lock:
                    written.update({(tenant, i): v for i, v in zip(ids, vecs, strict=True)})
                assert store.query(tenant, vecs[0], 1)[0].id == ids[0]
        except BaseException as exc:  # reported below, with the thread's own traceback
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert store.releases >= 3
    for tenant in ("acme", "beta", "gamma"):
        assert store.all_ids(tenant) == {i for (t, i) in written if t == tenant}
    assert all(store.query(t, v, 1)[0].id == i for (t, i), v in written.items())


def test_a_caller_that_joins_a_release_under_way_lets_it_finish_at_once() -> None:
    """A call already past the door when a release began (it was sizing its tenant) steps aside
    for that release when it needs room too: the release runs then, not after its drain times out."""
    inner = Recording()
    sizing = threading.Event()
    go_on = threading.Event()

    def rows(tenant: str) -> int:
        if tenant == "gamma":
            sizing.set()
            go_on.wait(10)
        return inner.count(tenant)

    store = VectorCacheBudget(inner, 60 * ROW, rows, drain_s=10.0)
    fill(store, "acme", 40, 1)
    late = threading.Thread(target=fill, args=(store, "gamma", 40, 3))
    late.start()
    assert sizing.wait(5)
    started = time.monotonic()
    needs_room = threading.Thread(target=fill, args=(store, "beta", 40, 4))
    needs_room.start()
    time.sleep(0.3)  # beta's release is now waiting for gamma's call
    go_on.set()
    late.join(15)
    needs_room.join(15)
    assert time.monotonic() - started < 5
    assert inner.released >= 1 and set(inner.released_while_running) == {0}


def test_releases_keep_each_tenant_to_its_own_rows(chroma: ChromaVectorStore) -> None:
    """The same ids in two tenants, with releases between every switch: a tenant's query and
    reads only ever see its own rows, never the other's."""
    store = VectorCacheBudget(chroma, 60 * ROW, chroma.count)
    written = {t: fill(store, t, 40, seed) for seed, t in enumerate(("acme", "beta"))}
    ids = [f"mem:{i}" for i in range(40)]
    for tenant, other in (("acme", "beta"), ("beta", "acme"), ("acme", "beta")):
        assert all(doc.startswith(f"{tenant} row") for doc, _meta in store.documents(tenant, ids).values())
        for i in (0, 21):
            hit = store.query(tenant, written[other][i], 1)[0]
            assert hit.distance > 0.05  # the other tenant's exact vector is not among this tenant's rows
            assert store.query(tenant, written[tenant][i], 1)[0].distance < 1e-3
    assert store.releases >= 3
