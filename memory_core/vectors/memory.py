"""The in-memory VectorStore: exact cosine over numpy arrays, the fast fake for unit tests.

It speaks the subset of Chroma's where-language the service emits, so tests over it and over
Chroma hold the same assertions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_core.vectors.api import Metadata, VectorHit

if TYPE_CHECKING:
    import numpy as np


class InMemoryVectorStore:
    """Exact cosine search over numpy arrays; the fast fake for unit tests."""

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, tuple[np.ndarray, str, Metadata]]] = {}

    def upsert(self, tenant, ids, embeddings, documents, metadatas) -> None:  # type: ignore[no-untyped-def]
        import numpy as np  # loads on first use: importing memory_core stays cheap

        rows = self._rows.setdefault(tenant, {})
        for i, e, d, m in zip(ids, embeddings, documents, metadatas, strict=True):
            rows[i] = (np.asarray(e, dtype=np.float64), d, {**m, "tenant": tenant})

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        rows = self._rows.get(tenant, {})
        for i in ids:
            rows.pop(i, None)

    def query(self, tenant, embedding, n, where=None, ids=None) -> list[VectorHit]:  # type: ignore[no-untyped-def]
        import numpy as np  # loads on first use: importing memory_core stays cheap

        q = np.asarray(embedding, dtype=np.float64)
        rows = self._rows.get(tenant, {})
        picked = rows.items() if ids is None else [(i, rows[i]) for i in dict.fromkeys(ids) if i in rows]
        hits = [
            VectorHit(i, float(1.0 - np.dot(v, q) / (np.linalg.norm(v) * np.linalg.norm(q) or 1.0)))
            for i, (v, _d, m) in picked
            if m.get("tenant") == tenant and _matches(m, where)
        ]
        return sorted(hits, key=lambda h: h.distance)[:n]

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        rows = self._rows.get(tenant, {})
        return {i for i in ids if i in rows}

    def all_ids(self, tenant: str) -> set[str]:
        return set(self._rows.get(tenant, {}))

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        rows = self._rows.get(tenant, {})
        return {i: (rows[i][1], dict(rows[i][2])) for i in ids if i in rows}

    def embeddings(self, tenant: str, ids: Sequence[str]) -> dict[str, list[float]]:
        rows = self._rows.get(tenant, {})
        return {i: [float(x) for x in rows[i][0]] for i in ids if i in rows}

    def count(self, tenant: str, where: dict[str, Any] | None = None) -> int:
        rows = self._rows.get(tenant, {})
        return len(rows) if not where else sum(1 for _v, _d, meta in rows.values() if _matches(meta, where))

    def tenants(self) -> list[str]:
        return sorted(t for t, rows in self._rows.items() if rows)

    def close(self) -> None:
        pass


def _matches(meta: Metadata, where: dict[str, Any] | None) -> bool:
    """The subset of Chroma's where-language the service emits: $and, $eq, $in, equality."""
    if not where:
        return True
    if "$and" in where:
        return all(_matches(meta, w) for w in where["$and"])
    if "$or" in where:
        return any(_matches(meta, w) for w in where["$or"])
    for key, cond in where.items():
        value = meta.get(key)
        if isinstance(cond, dict):
            if "$eq" in cond and value != cond["$eq"]:
                return False
            if "$in" in cond and value not in cond["$in"]:
                return False
            if "$ne" in cond and value == cond["$ne"]:
                return False
        elif value != cond:
            return False
    return True
