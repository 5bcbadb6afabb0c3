"""Chroma (embedded or client/server) as a :class:`~memory_core.vectors.api.VectorStore`.

One Chroma collection per tenant, named from a hash of the tenant, and every query also
carries ``where tenant == T``: a query cannot reach another tenant's rows even if a filter
were built wrong. Embeddings are always passed explicitly; Chroma's default embedding
function (which downloads a model) is never used.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from memory_core.embedding.local import release_freed_heap
from memory_core.errors import StoreError, StoreUnavailableError
from memory_core.vectors import chroma_import
from memory_core.vectors.api import VectorHit
from memory_core.vectors.chroma_errors import translate_errors

T = TypeVar("T")
BRUTE_FORCE_MAX = 800  # an ids= query over at most this many rows is scored exactly, in numpy


def collection_name(prefix: str, tenant: str) -> str:
    """A Chroma-safe collection name derived from the tenant (any tenant string is safe)."""
    return f"{prefix}_{hashlib.sha256(tenant.encode()).hexdigest()[:32]}"


def _scoped(tenant: str, where: dict[str, Any] | None) -> dict[str, Any] | None:
    """The caller's filter; the collection is already the tenant's own (see collection_name)."""
    return where or None


class ChromaVectorStore:
    """Chroma's persistent (embedded) or HTTP client behind the VectorStore Protocol.

    An embedded client is rebuilt after it raised an internal error (or an OSError): on a
    full disk Chroma fails compaction ("Failed to apply logs to the metadata segment"), and
    calling that system a few more times blocks forever inside its Rust core *holding the
    GIL*, which no deadline in this process can interrupt. So the failed system is stopped
    and dropped from Chroma's per-path cache, and the next call opens a fresh client on the
    same directory (which reads Chroma's own log back). Writes then work again once space returns.
    """

    def __init__(self, client: Any, prefix: str = "mc", *, remote: bool = False, retries: int = 3,
                 reconnect: Callable[[], Any] | None = None) -> None:
        self._client = client
        self._prefix = prefix
        self._remote = remote
        self._retries = retries
        self._collections: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._reconnect = reconnect
        self._reset_needed = False
        self._reset_lock = threading.Lock()
        self._path: Path | None = None  # the embedded store's directory
        self._reopen: Callable[[], Any] | None = reconnect  # after close(), the next call opens a client again
        self._loaded: set[str] = set()  # tenants queried or written since the client was built
        self.resets = 0  # how often the embedded client was rebuilt (diagnostics, tests)

    @classmethod
    def persistent(cls, path: str | os.PathLike[str], prefix: str = "mc") -> ChromaVectorStore:
        chromadb = chroma_import.chromadb()

        settings = chromadb.Settings(anonymized_telemetry=False, allow_reset=False)

        def connect() -> Any:  # a full or unwritable disk is a coded error
            return translate_errors(lambda: chromadb.PersistentClient(path=str(path), settings=settings),
                                     remote=False, retries=0)

        store = cls(connect(), prefix, reconnect=connect)
        store._path = Path(path)
        return store

    def _reset_if_failed(self, *, reading: bool = False) -> None:
        """Before any call: rebuild the embedded client if a call failed inside Chroma (see the
        class docstring). Reads need it as much as writes: a query into the failed system can
        block for good too. The fresh client opens first; if it cannot (a read-only or full
        directory), a write fails with that coded error; so does a read, unless the directory
        is not writable (a read-only store stays readable with the client it has: nothing failed
        inside it but a write it could not make), and the next call tries again."""
        if not self._reset_needed or self._reconnect is None:
            return
        with self._reset_lock:
            if not self._reset_needed:
                return
            try:
                self._rebuild()
            except StoreError:
                if reading and self._path is not None and not os.access(self._path, os.W_OK):
                    return
                raise

    def release_indexes(self) -> bool:
        """Drop every index the embedded client has loaded: it is rebuilt on the same directory, and
        each collection's next call reads its files back. False when there is nothing to rebuild (a
        client/server Chroma) or a fresh client cannot open (the current one then stays). The caller
        makes sure that no call runs on this store meanwhile (see :mod:`memory_core.vectors.cache`)."""
        if self._reconnect is None:
            return False
        with self._reset_lock:
            try:
                self._rebuild()
            except StoreError:
                return False
        # glibc keeps the freed indexes' pages: without a trim, RSS crept up ~1.5 MB a release
        # (250 -> 310 MB over 39 releases; trimmed, 226-242 MB; bench.latency.vector_cache --rounds 10)
        release_freed_heap()
        return True

    def _rebuild(self) -> None:
        """Open a fresh client on the directory, then stop the old one's system (out of Chroma's per-path
        cache first, so the fresh client is a new system); if the fresh one cannot open, the old one stays."""
        from chromadb.api.shared_system_client import SharedSystemClient as Shared
        from chromadb.errors import ChromaError

        assert self._reconnect is not None
        found = getattr(self._client, "_identifier", None)
        ident = found if isinstance(found, str) else ""
        old = Shared._identifier_to_system.pop(ident, None) if ident else None
        refs = Shared._identifier_to_refcount.pop(ident, None) if ident else None
        try:
            fresh = self._reconnect()
        except StoreError:
            if old is not None:  # keep serving with the old system
                Shared._identifier_to_system[ident] = old
                if refs is not None:
                    Shared._identifier_to_refcount[ident] = refs
            raise
        with self._lock:
            self._client = fresh
            self._collections.clear()
            self._loaded.clear()
        self._reset_needed = False
        self.resets += 1
        if old is not None:
            # a half-failed system may be stopped already; it is out of Chroma's cache either way
            with contextlib.suppress(ChromaError, OSError, AttributeError):
                old.stop()

    @classmethod
    def http(
        cls,
        host: str,
        port: int,
        prefix: str = "mc",
        *,
        ssl: bool = False,
        headers: dict[str, str] | None = None,
        retries: int = 3,
    ) -> ChromaVectorStore:
        chromadb = chroma_import.chromadb()

        settings = chromadb.Settings(anonymized_telemetry=False)

        def connect() -> Any:
            return chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=headers, settings=settings)

        store = cls(translate_errors(connect, remote=True, retries=retries), prefix, remote=True, retries=retries)
        store._reopen = lambda: translate_errors(connect, remote=True, retries=retries)
        return store

    def _run(self, fn: Callable[[], T]) -> T:
        try:
            return translate_errors(fn, remote=self._remote, retries=self._retries)
        except StoreError as exc:
            from chromadb.errors import InternalError

            if self._reconnect is not None and isinstance(exc.__cause__, InternalError | OSError):
                self._reset_needed = True
            raise

    def _open_client(self) -> Any:
        """The client; a closed store opens a new one (a caller that passed its own store to
        ``MemoryCore.open`` may open a core on it again after closing the last)."""
        with self._lock:
            if self._client is None:
                if self._reopen is None:
                    raise StoreUnavailableError("The vector store is closed.")
                self._client = self._reopen()
            return self._client

    def _collection(self, tenant: str, *, create: bool) -> Any | None:
        self._reset_if_failed(reading=True)  # a write has reset (or refused) before it gets here
        with self._lock:
            col = self._collections.get(tenant)
            if col is not None:
                return col
        name = collection_name(self._prefix, tenant)
        if create:
            col = self._run(
                lambda: self._open_client().get_or_create_collection(
                    name, metadata={"hnsw:space": "cosine", "tenant": tenant}, embedding_function=None
                )
            )
        else:
            from chromadb.errors import NotFoundError

            def fetch() -> Any:
                try:
                    return self._open_client().get_collection(name, embedding_function=None)
                except NotFoundError:  # a tenant that never wrote: nothing to read
                    return None

            col = self._run(fetch)
            if col is None:
                return None
        with self._lock:
            self._collections[tenant] = col
        return col

    def loaded(self, tenant: str) -> bool:
        """Whether a query or write of ``tenant`` ran since this client was built: the first one
        loads the collection's whole HNSW index (embedded; a server may have it loaded or not)."""
        with self._lock:
            return tenant in self._loaded

    def _touched(self, tenant: str) -> None:
        with self._lock:
            self._loaded.add(tenant)

    def upsert(self, tenant, ids, embeddings, documents, metadatas) -> None:  # type: ignore[no-untyped-def]
        self._reset_if_failed()
        import numpy as np  # loads on first use: importing memory_core stays cheap

        col = self._collection(tenant, create=True)
        assert col is not None  # create=True always yields the collection
        metas = [{**m, "tenant": tenant} for m in metadatas]
        self._run(
            lambda: col.upsert(
                ids=list(ids), embeddings=np.asarray(embeddings, dtype=np.float32),
                documents=list(documents), metadatas=metas,
            )
        )
        self._touched(tenant)

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        self._reset_if_failed()
        col = self._collection(tenant, create=False)
        if col is not None and ids:
            self._run(lambda: col.delete(ids=list(ids)))
            self._touched(tenant)

    def query(self, tenant, embedding, n, where=None, ids=None) -> list[VectorHit]:  # type: ignore[no-untyped-def]
        col = self._collection(tenant, create=False)
        if col is None or n <= 0 or (ids is not None and not ids):
            return []
        if ids is not None and len(ids) <= BRUTE_FORCE_MAX:
            return self._exact(col, embedding, n, where, ids)
        res = self._run(
            lambda: col.query(
                query_embeddings=[list(embedding)], n_results=n, where=_scoped(tenant, where),
                ids=None if ids is None else list(ids), include=["distances"],
            )
        )
        self._touched(tenant)
        return [VectorHit(i, float(d)) for i, d in zip(res["ids"][0], res["distances"][0], strict=True)]

    def _exact(self, col: Any, embedding: Sequence[float], n: int, where: dict[str, Any] | None,
               ids: Sequence[str]) -> list[VectorHit]:
        """Cosine over the given rows' stored vectors: an HNSW search restricted to a few ids
        walks most of the graph to find them (140 ms for 100 of 100k rows, 4 ms this way)."""
        import numpy as np

        res = self._run(lambda: col.get(ids=list(ids), where=_scoped("", where), include=["embeddings"]))
        if not res["ids"]:
            return []
        vecs = np.asarray(res["embeddings"], dtype=np.float64)
        q = np.asarray(embedding, dtype=np.float64)
        norms = np.linalg.norm(vecs, axis=1) * (np.linalg.norm(q) or 1.0)
        dist = 1.0 - (vecs @ q) / np.where(norms == 0, 1.0, norms)
        order = np.argsort(dist, kind="stable")[:n]
        return [VectorHit(res["ids"][i], float(dist[i])) for i in order]

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        col = self._collection(tenant, create=False)
        if col is None or not ids:
            return set()
        res = self._run(lambda: col.get(ids=list(ids), where={"tenant": tenant}, include=[]))
        return set(res["ids"])

    def all_ids(self, tenant: str) -> set[str]:
        col = self._collection(tenant, create=False)
        if col is None:
            return set()
        out: set[str] = set()
        offset, page = 0, 5000
        while True:
            res = self._run(functools.partial(col.get, include=[], limit=page, offset=offset))
            out.update(res["ids"])
            if len(res["ids"]) < page:
                return out
            offset += page

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        """Stored document and metadata per id (used by doctor to restore lost graph rows)."""
        col = self._collection(tenant, create=False)
        if col is None or not ids:
            return {}
        res = self._run(lambda: col.get(ids=list(ids), include=["documents", "metadatas"]))
        return {
            i: (d or "", dict(m or {}))
            for i, d, m in zip(res["ids"], res["documents"], res["metadatas"], strict=True)
        }

    def embeddings(self, tenant: str, ids: Sequence[str]) -> dict[str, list[float]]:
        """Stored vector per id (one get, no search)."""
        col = self._collection(tenant, create=False)
        if col is None or not ids:
            return {}
        res = self._run(lambda: col.get(ids=list(ids), where={"tenant": tenant}, include=["embeddings"]))
        self._touched(tenant)
        return {i: [float(x) for x in e] for i, e in zip(res["ids"], res["embeddings"], strict=True)}

    def count(self, tenant: str, where: dict[str, Any] | None = None) -> int:
        col = self._collection(tenant, create=False)
        if col is None:
            return 0
        if not where:
            return int(self._run(col.count))
        n, offset, page = 0, 0, 5000  # Chroma counts a filter only by listing its ids
        while True:
            res = self._run(functools.partial(col.get, where=_scoped(tenant, where), include=[], limit=page,
                                              offset=offset))
            n += len(res["ids"])
            if len(res["ids"]) < page:
                return n
            offset += page

    def tenants(self) -> list[str]:
        self._reset_if_failed(reading=True)
        cols = self._run(lambda: self._open_client().list_collections())
        out = []
        for col in cols:
            meta = getattr(col, "metadata", None) or {}
            if col.name.startswith(self._prefix + "_") and "tenant" in meta:
                out.append(str(meta["tenant"]))
        return sorted(out)

    def drop_all(self) -> None:
        """Drop every collection of this store's prefix (a re-embed drops the index it replaced)."""
        cols = self._run(lambda: self._open_client().list_collections())
        for name in [c.name for c in cols if c.name.startswith(self._prefix + "_")]:
            self._run(functools.partial(self._open_client().delete_collection, name))
        with self._lock:
            self._collections.clear()

    def close(self) -> None:
        """Release the client: an embedded one stops its system (SQLite handles, index files, threads)
        once no other client in this process shares the directory. A client that failed inside Chroma
        is only dropped: stopping it could block for good (see the class docstring)."""
        with self._lock:
            self._collections.clear()
            self._loaded.clear()
            client, self._client = self._client, None
        close = getattr(client, "close", None)
        if callable(close) and not self._reset_needed:
            translate_errors(close, remote=self._remote, retries=0)
