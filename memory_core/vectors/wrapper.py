"""One forwarding base for the vector-store wrappers, so each states only the behaviour it adds.

A wrapper (:class:`~memory_core.vectors.lazy.LazyVectorStore`,
:class:`~memory_core.vectors.cache.VectorCacheBudget`,
:class:`~memory_core.vectors.deadline.DeadlineVectorStore`) is a :class:`VectorStore` over another
one. Every Protocol call goes through :meth:`VectorStoreWrapper._call` with what it is (the
``op``), the tenant it touches and what it adds, and the call itself as a function of the inner
store; a wrapper overrides ``_call`` (and ``_inner`` when the inner store is built late).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from memory_core.vectors.api import Metadata, VectorHit, VectorStore

T = TypeVar("T")
Op = Literal["upsert", "delete", "query", "get", "count", "list"]


class VectorStoreWrapper:
    """The VectorStore Protocol, forwarded to :meth:`_inner` through :meth:`_call`."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner

    def _inner(self) -> VectorStore:
        return self.inner

    def _call(self, op: Op, tenant: str | None, fn: Callable[[VectorStore], T], *, added: int = 0,
              dimension: int | None = None) -> T:
        """Run ``fn`` on the inner store. ``tenant`` is the tenant the call touches (None: all of
        them), ``added`` the rows it writes, ``dimension`` the vectors' (None when it carries none)."""
        return fn(self._inner())

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        self._call("upsert", tenant, lambda s: s.upsert(tenant, ids, embeddings, documents, metadatas),
                   added=len(ids), dimension=len(embeddings[0]) if len(embeddings) else None)

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self._call("delete", tenant, lambda s: s.delete(tenant, ids))

    def query(self, tenant: str, embedding: Sequence[float], n: int,
              where: dict[str, Any] | None = None, ids: Sequence[str] | None = None) -> list[VectorHit]:
        return self._call("query", tenant, lambda s: s.query(tenant, embedding, n, where, ids),
                          dimension=len(embedding) or None)

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        return self._call("get", tenant, lambda s: s.existing_ids(tenant, ids))

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        return self._call("get", tenant, lambda s: s.documents(tenant, ids))

    def embeddings(self, tenant: str, ids: Sequence[str]) -> dict[str, list[float]]:
        return self._call("get", tenant, lambda s: s.embeddings(tenant, ids))

    def all_ids(self, tenant: str) -> set[str]:
        return self._call("get", tenant, lambda s: s.all_ids(tenant))

    def count(self, tenant: str, where: dict[str, Any] | None = None) -> int:
        return self._call("count", tenant, lambda s: s.count(tenant, where))

    def tenants(self) -> list[str]:
        return self._call("list", None, lambda s: s.tenants())

    def close(self) -> None:
        self._inner().close()
