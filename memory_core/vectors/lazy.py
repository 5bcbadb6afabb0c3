"""A VectorStore that opens its backend on first use.

Importing chromadb and opening its persistent client costs seconds; commands that never touch
a vector (``stats``-like reads of the graph, ``recent``, ``show``, the MCP server before its
first recall) should not pay it. :class:`LazyVectorStore` builds the real store on the first
call (once, under a lock) and :meth:`open` lets a server warm it up in the background.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from memory_core.vectors.api import VectorStore, index_loaded
from memory_core.vectors.wrapper import VectorStoreWrapper


class LazyVectorStore(VectorStoreWrapper):
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

    def _inner(self) -> VectorStore:
        return self.open()

    def loaded(self, tenant: str) -> bool:
        store = self._store
        return store is not None and index_loaded(store, tenant)

    def close(self) -> None:
        with self._lock:
            if self._store is not None:
                self._store.close()
