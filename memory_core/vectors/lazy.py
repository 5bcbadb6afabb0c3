"""A VectorStore that opens its backend on first use.

Importing chromadb and opening its persistent client costs seconds; commands that never touch
a vector (``stats``-like reads of the graph, ``recent``, ``show``, the MCP server before its
first recall) should not pay it. :class:`LazyVectorStore` builds the real store on the first
call (once, under a lock) and :meth:`open` lets a server warm it up in the background.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from memory_core.vectors.chroma import Metadata, VectorHit, VectorStore, index_loaded


class LazyVectorStore:
    """The VectorStore Protocol over a store built by ``build`` on first use."""

    def __init__(self, build: Callable[[], VectorStore]) -> None:
        self._build = build
        self._store: VectorStore | None = None
        self._lock = threading.Lock()

    @property
    def is_open(self) -> bool:
        return self._store is not None

    def open(self) -> VectorStore:
        """The backend, built now if it is not yet (errors of the build propagate, coded)."""
        store = self._store
        if store is not None:
            return store
        with self._lock:
            if self._store is None:
                self._store = self._build()
            return self._store

    def loaded(self, tenant: str) -> bool:
        store = self._store
        return store is not None and index_loaded(store, tenant)

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        self.open().upsert(tenant, ids, embeddings, documents, metadatas)

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self.open().delete(tenant, ids)

    def query(self, tenant: str, embedding: Sequence[float], n: int,
              where: dict[str, Any] | None = None, ids: Sequence[str] | None = None) -> list[VectorHit]:
        return self.open().query(tenant, embedding, n, where, ids)

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        return self.open().existing_ids(tenant, ids)

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        return self.open().documents(tenant, ids)

    def all_ids(self, tenant: str) -> set[str]:
        return self.open().all_ids(tenant)

    def count(self, tenant: str) -> int:
        return self.open().count(tenant)

    def tenants(self) -> list[str]:
        return self.open().tenants()

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
