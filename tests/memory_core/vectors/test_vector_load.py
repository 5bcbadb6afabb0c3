"""A tenant's first vector call may load its whole index: slow, but not a hang.

Embedded Chroma loads a collection's HNSW index on its first query after the client was built
(at start, or after a release by the vector cache): 6.5 s for 1M rows with the files in the page
cache, 49 s from a cold disk. Meanwhile Chroma holds a lock that every write needs, for every
collection: an add to a tiny tenant waited 6.45 s behind that load. Under the 30 s vector deadline
the write (and the loading query) failed with STORE_UNAVAILABLE, and the store was marked wedged
for every tenant until the load ended. The deadline now allows a call on a tenant whose index is
not loaded its rows' load time on top, and a call waiting behind such a load waits for it, then
gets its own deadline again. A load past that allowance, or any call past its own deadline with
no load to explain it, still fails and wedges as before.

:class:`LoadingStore` plays Chroma's part over the in-memory store: the first query of a tenant
holds a lock every write takes, for a set time; it says which tenants are loaded.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import StoreUnavailableError
from memory_core.settings import load_settings
from memory_core.vectors import deadline as vd
from memory_core.vectors.api import Metadata, VectorHit, index_loaded
from memory_core.vectors.chroma import ChromaVectorStore
from memory_core.vectors.deadline import DeadlineVectorStore
from memory_core.vectors.memory import InMemoryVectorStore

DEADLINE_S = 0.3
VEC = [1.0, 0.0, 0.0, 0.0]


class LoadingStore(InMemoryVectorStore):
    """A tenant's first query loads its index for ``load_s[tenant]`` seconds, holding the lock
    that writes take (Chroma's behaviour); ``hang`` makes the next load never end until released."""

    def __init__(self, load_s: dict[str, float]) -> None:
        super().__init__()
        self.load_s = load_s
        self._loaded: set[str] = set()
        self._write_lock = threading.Lock()
        self.loading = threading.Event()
        self.hang = False
        self.released = threading.Event()

    def loaded(self, tenant: str) -> bool:
        return tenant in self._loaded

    def forget_loads(self) -> None:
        self._loaded.clear()

    def query(self, tenant: str, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None,
              ids: Sequence[str] | None = None) -> list[VectorHit]:
        if tenant not in self._loaded:
            with self._write_lock:
                self.loading.set()
                if self.hang:
                    self.released.wait(30)
                time.sleep(self.load_s.get(tenant, 0.0))
                self._loaded.add(tenant)
        return super().query(tenant, embedding, n, where, ids)

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        with self._write_lock:
            super().upsert(tenant, ids, embeddings, documents, metadatas)


def rows_of(counts: dict[str, int]) -> Callable[[str], int]:
    return lambda tenant: counts.get(tenant, 0)


@pytest.fixture
def rate(monkeypatch: pytest.MonkeyPatch) -> float:
    """100 rows a second: a tenant of 100 rows may take 1 s to load."""
    monkeypatch.setattr(vd, "LOAD_ROWS_PER_S", 100.0)
    return 100.0


def in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # handed to the test
            out["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def upsert(store: Any, tenant: str, ref: str) -> None:
    store.upsert(tenant, [ref], [VEC], [ref], [{}])


@pytest.mark.slow
def test_a_write_waits_behind_another_tenants_index_load_instead_of_wedging_the_store(rate: float) -> None:
    inner = LoadingStore({"big": 1.0})  # 3x the deadline, within big's allowance (200 rows: 2 s)
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=rows_of({"big": 200, "small": 1}))
    upsert(store, "big", "b1")
    loader, loaded = in_thread(lambda: store.query("big", VEC, 1))
    assert inner.loading.wait(5)
    started = time.monotonic()
    upsert(store, "small", "s1")  # blocked by the load, far past DEADLINE_S
    assert time.monotonic() - started > DEADLINE_S
    loader.join(10)
    assert "error" not in loaded and [h.id for h in loaded["value"]] == ["b1"]
    assert store.wedged() is None
    assert [h.id for h in store.query("small", VEC, 1)] == ["s1"]
    store.close()


@pytest.mark.slow
def test_a_load_past_its_allowance_fails_and_wedges_as_a_hang_does(rate: float) -> None:
    inner = LoadingStore({})
    inner.hang = True
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=rows_of({"big": 30}))  # allowance 0.3 s
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as info:
        store.query("big", VEC, 1)
    waited = time.monotonic() - started
    assert 0.6 - 0.05 < waited < 5, waited  # its deadline and its allowance, not more
    assert info.value.code == "STORE_UNAVAILABLE" and "0.6 s" in info.value.message
    assert store.wedged() is not None
    # a write behind the stuck load is refused at once, as behind any stuck call
    with pytest.raises(StoreUnavailableError):
        upsert(store, "small", "s1")
    inner.released.set()
    for _ in range(200):
        if store.wedged() is None:
            break
        time.sleep(0.05)
    assert store.wedged() is None
    store.close()


@pytest.mark.slow
def test_a_call_behind_a_load_gets_its_own_deadline_again_once_the_load_ends(rate: float) -> None:
    """The load ends; the write behind it then hangs on its own: it fails one deadline later."""
    inner = LoadingStore({"big": 0.8})
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=rows_of({"big": 200}))
    upsert(store, "big", "b1")
    loader, _loaded = in_thread(lambda: store.query("big", VEC, 1))
    assert inner.loading.wait(5)
    release = threading.Event()
    original = inner.upsert

    def hung_upsert(*args: Any) -> None:
        original(*args)
        release.wait(30)

    inner.upsert = hung_upsert  # type: ignore[method-assign]
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        upsert(store, "small", "s1")
    waited = time.monotonic() - started
    loader.join(10)
    assert 0.8 + DEADLINE_S - 0.15 < waited < 0.8 + 2 * DEADLINE_S + 1.0, waited
    release.set()
    store.close()


def test_a_loaded_tenant_gets_no_allowance(rate: float) -> None:
    inner = LoadingStore({})
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=rows_of({"big": 1000}))  # allowance 10 s
    upsert(store, "big", "b1")
    store.query("big", VEC, 1)  # loaded now
    assert index_loaded(inner, "big")
    release = threading.Event()
    original = inner.query
    inner.query = lambda *a, **k: (release.wait(30), original(*a, **k))[1]  # type: ignore[method-assign]
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError):
        store.query("big", VEC, 1)
    assert time.monotonic() - started < DEADLINE_S + 1.0
    release.set()
    store.close()


def test_stores_that_never_load_count_as_loaded() -> None:
    assert index_loaded(InMemoryVectorStore(), "anyone")


def test_embedded_chroma_says_which_indexes_it_has_loaded_and_forgets_them_on_release(tmp_path: Path) -> None:
    store = ChromaVectorStore.persistent(tmp_path / "chroma")
    try:
        assert not store.loaded("acme")
        store.upsert("acme", ["m1"], [VEC], ["apples"], [{}])
        assert store.loaded("acme") and not store.loaded("other")
        assert store.release_indexes()
        assert not store.loaded("acme")
        assert [h.id for h in store.query("acme", VEC, 1)] == ["m1"]
        assert store.loaded("acme")
    finally:
        store.close()


@pytest.fixture
def core(tmp_path: Path, rate: float) -> Iterator[tuple[MemoryCore, LoadingStore]]:
    inner = LoadingStore({})
    settings = load_settings(environ={}, overrides={
        "storage": {"vector_deadline_s": DEADLINE_S}, "embedding": {"provider": "hash"}})
    c = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), vector_store=inner)
    yield c, inner
    c.close()


@pytest.mark.slow
def test_through_memory_core_an_add_during_a_big_tenants_first_recall_is_acknowledged(
        core: tuple[MemoryCore, LoadingStore]) -> None:
    c, inner = core
    c.add_memories([{"tenant": "big", "session": "s1", "agent": "a", "content": f"note {i} about kilns"}
                    for i in range(120)])  # 1.2 s of allowance from the graph's count
    inner.forget_loads()
    inner.load_s["big"] = 0.9
    recall, found = in_thread(lambda: c.recall("big", "kilns", limit=3))
    assert inner.loading.wait(5)
    added = c.add_memory("small", "s1", "b", "the glaze order went out")
    recall.join(10)
    assert "error" not in found
    assert "vector_search" not in found["value"].diagnostics  # the vector branch answered
    assert [m.ref for m in c.recall("small", "glaze order", limit=1).messages] == [added.ref]


def test_the_configured_chain_reports_loads_through_its_lazy_open_and_cache_budget(tmp_path: Path) -> None:
    from memory_core.open import open_vector_store

    settings = load_settings(environ={}, overrides={"storage": {"vector_cache_mb": 64}})
    chain = open_vector_store(settings, tmp_path, rows=lambda tenant: 1)
    try:
        assert not index_loaded(chain, "acme")  # not even open yet
        chain.upsert("acme", ["m1"], [VEC], ["apples"], [{}])
        assert index_loaded(chain, "acme") and not index_loaded(chain, "other")
        inner = chain.open()  # type: ignore[attr-defined]
        assert inner.inner.release_indexes()  # what the cache budget does past its bound
        assert not index_loaded(chain, "acme")
    finally:
        chain.close()


def test_when_the_graph_cannot_count_a_tenant_the_call_runs_under_the_plain_deadline() -> None:
    from graph.api import GraphStoreError

    def broken(tenant: str) -> int:
        raise GraphStoreError("unavailable", "the graph store is down for this test")

    inner = LoadingStore({})
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=broken)
    upsert(store, "acme", "a1")
    assert [h.id for h in store.query("acme", VEC, 1)] == ["a1"]
    store.close()


def test_loads_that_returned_are_not_kept(rate: float) -> None:
    inner = LoadingStore({})
    store = DeadlineVectorStore(inner, DEADLINE_S, rows=rows_of({f"t{i}": 10 for i in range(50)}))
    for i in range(50):
        upsert(store, f"t{i}", f"r{i}")  # a first call of its tenant (this fake's writes load nothing)
        store.query(f"t{i}", VEC, 1)  # and the load
    assert len(store._loads) <= 1
    store.close()
