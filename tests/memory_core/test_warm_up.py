"""Servers warm the embedding model and Chroma in the background right after start."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import EmbeddingError
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from memory_core.vectors.lazy import LazyVectorStore
from memory_core.warm_up import warm_up_in_background


class SlowLoadingEmbedder(HashEmbedder):
    """A local model stand-in: ``warm_up`` is where the model would load."""

    def __init__(self) -> None:
        super().__init__()
        self.loaded = threading.Event()

    def warm_up(self) -> None:
        self.loaded.set()


class BrokenEmbedder(HashEmbedder):
    def warm_up(self) -> None:
        raise EmbeddingError("The embedding model file is missing.")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingError("The embedding model file is missing.")


def settings() -> Settings:
    return load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})


def test_opening_a_store_leaves_embedded_chroma_closed_until_a_vector_is_needed(tmp_path: Path) -> None:
    with MemoryCore.open(tmp_path, settings=settings(), embedder=HashEmbedder()) as core:
        lazy = core._vectors.inner.inner  # type: ignore[attr-defined]
        assert isinstance(lazy, LazyVectorStore) and not lazy.is_open
        core.query_recent_turns("acme", "s1")
        assert not lazy.is_open
        core.add_memory("acme", "s1", "alice", "now a vector is written")
        assert lazy.is_open


def test_warm_up_loads_the_model_and_opens_chroma_without_a_call(tmp_path: Path) -> None:
    embedder = SlowLoadingEmbedder()
    with MemoryCore.open(tmp_path, settings=settings(), embedder=embedder) as core:
        for thread in core.warm_up_in_background():
            thread.join(60)
        assert embedder.loaded.is_set()
        assert core._vectors.inner.inner.is_open  # type: ignore[attr-defined]


def test_a_failing_warm_up_leaves_its_error_to_the_first_call_instead_of_crashing_a_thread() -> None:
    failures: list[BaseException] = []
    previous = threading.excepthook
    threading.excepthook = lambda args: failures.append(args.exc_value)  # type: ignore[assignment]
    try:
        for thread in warm_up_in_background(BrokenEmbedder()):
            thread.join(10)
    finally:
        threading.excepthook = previous
    assert failures == []
