"""A server loads the vector indexes its first recalls will need right after it starts.

Real embedded Chroma under the whole configured chain (deadline, lazy open, cache budget): which
tenants are loaded is what Chroma's client has queried since it was built (``index_loaded``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import StoreUnavailableError
from memory_core.settings import load_settings
from memory_core.vectors.api import VectorHit, index_loaded
from memory_core.vectors.memory import InMemoryVectorStore

TENANTS = {"old": "2024-01-05T10:00:00Z", "mid": "2025-03-01T10:00:00Z", "new": "2026-06-01T10:00:00Z"}


def open_core(path: Path, **storage: Any) -> MemoryCore:
    server = storage.pop("server", {})
    settings = load_settings(environ={}, overrides={
        "storage": storage, "server": server, "embedding": {"provider": "hash"}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder())


def seed(path: Path, rows: dict[str, int] | None = None) -> None:
    core = open_core(path)
    try:
        for tenant, ts in TENANTS.items():
            n = (rows or {}).get(tenant, 2)
            for start in range(0, n, 500):
                core.add_memories([{"tenant": tenant, "session": "s1", "agent": "a", "content": f"{tenant} note {i}",
                                    "timestamp": ts} for i in range(start, min(n, start + 500))])
    finally:
        core.close()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Path]:
    seed(tmp_path / "data")
    yield tmp_path / "data"


def loaded(core: MemoryCore) -> set[str]:
    return {t for t in TENANTS if index_loaded(core._vectors, t)}


def test_a_fresh_process_has_no_index_loaded_and_a_recall_loads_its_tenants(store: Path) -> None:
    core = open_core(store)
    try:
        assert loaded(core) == set()
        core.recall("mid", "note", limit=1)
        assert loaded(core) == {"mid"}
    finally:
        core.close()


def loaded_after_warm_up(store: Path, **storage: Any) -> set[str]:
    """What a server's background warm-up has loaded once it finished."""
    core = open_core(store, **storage)
    try:
        for thread in core.warm_up_in_background():
            thread.join(60)
        return loaded(core)
    finally:
        core.close()


def test_the_warm_up_loads_the_tenants_with_the_newest_memories_up_to_the_setting(store: Path) -> None:
    assert loaded_after_warm_up(store, preload_tenants=2) == {"new", "mid"}


def test_a_server_bound_to_a_tenant_loads_that_one_only(store: Path) -> None:
    core = open_core(store, server={"tenant": "old"})
    try:
        assert core.preload_indexes() == ["old"]
        assert loaded(core) == {"old"}
    finally:
        core.close()


def test_preload_off_loads_nothing(store: Path) -> None:
    assert loaded_after_warm_up(store, preload_tenants=0) == set()


@pytest.mark.slow
def test_the_preload_stays_within_the_vector_cache_budget_and_skips_what_does_not_fit(tmp_path: Path) -> None:
    # 64-d hash vectors: ~960 bytes a row by the cache's estimate, so 1,200 rows do not fit in 1 MB
    seed(tmp_path / "data", rows={"new": 1200, "mid": 5, "old": 5})
    core = open_core(tmp_path / "data", vector_cache_mb=1)
    try:
        assert core.preload_indexes() == ["mid", "old"]
        assert loaded(core) == {"mid", "old"}
        assert core.recall("new", "new note", limit=1).messages  # still answers: it loads on its first call
    finally:
        core.close()


class FailingFor(InMemoryVectorStore):
    """Queries of one tenant fail; reports what it has queried as loaded."""

    def __init__(self, bad: str) -> None:
        super().__init__()
        self.bad = bad
        self.queried: set[str] = set()

    def loaded(self, tenant: str) -> bool:
        return tenant in self.queried

    def query(self, tenant: str, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None,
              ids: Sequence[str] | None = None) -> list[VectorHit]:
        if tenant == self.bad:
            raise StoreUnavailableError("the vector store is down for this test")
        self.queried.add(tenant)
        return super().query(tenant, embedding, n, where, ids)


def test_a_tenant_whose_load_fails_is_skipped_and_the_others_still_load(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    vectors = FailingFor("mid")
    core = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), vector_store=vectors)
    try:
        for tenant, ts in TENANTS.items():
            core.add_memory(tenant, "s1", "a", f"{tenant} note", timestamp=ts)
        assert core.preload_indexes() == ["new", "old"]
        assert vectors.queried == {"new", "old"}
    finally:
        core.close()


@pytest.mark.parametrize("mode", ["hash", "omit", "plain"])
def test_the_preload_names_tenants_in_its_log_only_as_logs_tenant_says(store: Path, mode: str,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """A tenant's name is data: the logs show it hashed (the default), not at all, or as is when asked."""
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "logs": {"tenant": mode}})
    core = MemoryCore.open(store, settings=settings, embedder=HashEmbedder())
    try:
        with caplog.at_level(logging.INFO, logger="memory_core.vectors.preload"):
            assert sorted(core.preload_indexes()) == sorted(TENANTS)
    finally:
        core.close()
    text = " ".join(r.getMessage() for r in caplog.records)
    assert "preloaded the vector indexes of 3 tenant(s)" in text
    assert all((name in text) == (mode == "plain") for name in TENANTS)
    assert ("h:" in text) == (mode == "hash")
