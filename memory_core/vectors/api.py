"""The vector-store seam: what the service needs from a vector index, always scoped to one tenant.

Implementations: :mod:`memory_core.vectors.chroma` (embedded or a Chroma server) and
:mod:`memory_core.vectors.memory` (exact cosine in numpy, the fast fake for tests). Wrappers that
add one behaviour each share :class:`memory_core.vectors.wrapper.VectorStoreWrapper`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

Metadata = dict[str, str | int | float | bool]


@dataclass(frozen=True)
class VectorHit:
    id: str
    distance: float  # cosine distance: 0 = identical, 2 = opposite


class VectorStore(Protocol):
    """What the service needs from a vector index, always scoped to one tenant."""

    def upsert(
        self,
        tenant: str,
        ids: Sequence[str],
        embeddings: Sequence[Sequence[float]],
        documents: Sequence[str],
        metadatas: Sequence[Metadata],
    ) -> None: ...

    def delete(self, tenant: str, ids: Sequence[str]) -> None: ...

    def query(
        self, tenant: str, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        """The ``n`` nearest rows, among those ``where`` matches and (when given) among ``ids``."""
        ...

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]: ...

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]: ...

    def embeddings(self, tenant: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """The stored vector per id (absent ids left out): consolidation compares rows by them."""
        ...

    def all_ids(self, tenant: str) -> set[str]: ...

    def count(self, tenant: str, where: dict[str, Any] | None = None) -> int:
        """The tenant's records, or those ``where`` matches (e.g. ``{"kind": "episode"}``)."""
        ...

    def tenants(self) -> list[str]: ...

    def close(self) -> None: ...


@runtime_checkable
class IndexLoading(Protocol):
    """A store that loads a tenant's index on its first call (embedded Chroma: the whole HNSW index)."""

    def loaded(self, tenant: str) -> bool:
        """Whether ``tenant``'s index is loaded already (its next call pays no load)."""
        ...


def index_loaded(store: object, tenant: str) -> bool:
    """False when ``store``'s next call on ``tenant`` may first load its index: a slow call, not a
    hang (see :mod:`memory_core.vectors.deadline`). Stores that never load count as loaded."""
    return store.loaded(tenant) if isinstance(store, IndexLoading) else True
