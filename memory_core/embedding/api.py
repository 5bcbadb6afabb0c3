"""The embedder seam: what the service needs from a model that turns texts into vectors.

Implementations: the local models and the deterministic hashing one (:mod:`memory_core.embedding.local`),
remote models through the provider client (:mod:`memory_core.embedding.remote`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def embed_query(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """A recall query's vectors: through the embedder's ``embed_query`` where it has one (a local
    model sizes that run for recall's concurrency), else its ``embed``."""
    run = getattr(embedder, "embed_query", None)
    return run(texts) if callable(run) else embedder.embed(texts)
