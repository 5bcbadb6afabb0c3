"""Fault injection at the store boundaries, for the disk-fault and server-outage tests.

- :class:`FaultyVectorStore` implements the VectorStore Protocol over a real store and
  raises a chosen error from ``upsert`` or ``delete`` while a fault is armed.
- :class:`FaultyChromaClient` sits one level lower, between ``ChromaVectorStore`` and a
  real Chroma client, and makes collection writes raise what Chroma itself raises (so
  the store's own error translation is exercised).
- :class:`HangingVectorStore` makes writes block until released (embedded Chroma's futex
  waits on a full disk), for the deadline tests.
- :func:`read_only_directories` makes a data directory read-only for a running process:
  no new file can be created in it, as after ``chmod -R a-w`` (files already open stay
  writable). As root, chmod does not stop anyone, so it uses the immutable attribute.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from memory_core.vectors.api import Metadata, VectorHit, VectorStore


class FaultyVectorStore:
    """A VectorStore that fails on demand; ``upserts_before_failing`` lets a batch half-succeed."""

    def __init__(self, inner: VectorStore) -> None:
        self.inner = inner
        self.upsert_error: BaseException | None = None
        self.upserts_before_failing = 0
        self.delete_error: BaseException | None = None
        self.upsert_calls = 0

    def clear(self) -> None:
        self.upsert_error = None
        self.delete_error = None
        self.upserts_before_failing = 0

    def upsert(
        self,
        tenant: str,
        ids: Sequence[str],
        embeddings: Sequence[Sequence[float]],
        documents: Sequence[str],
        metadatas: Sequence[Metadata],
    ) -> None:
        self.upsert_calls += 1
        if self.upsert_error is not None:
            if self.upserts_before_failing <= 0:
                raise self.upsert_error
            self.upserts_before_failing -= 1
        self.inner.upsert(tenant, ids, embeddings, documents, metadatas)

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        if self.delete_error is not None:
            raise self.delete_error
        self.inner.delete(tenant, ids)

    def query(
        self, tenant: str, embedding: Sequence[float], n: int, where: dict[str, Any] | None = None,
        ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        return self.inner.query(tenant, embedding, n, where, ids)

    def existing_ids(self, tenant: str, ids: Sequence[str]) -> set[str]:
        return self.inner.existing_ids(tenant, ids)

    def all_ids(self, tenant: str) -> set[str]:
        return self.inner.all_ids(tenant)

    def documents(self, tenant: str, ids: Sequence[str]) -> dict[str, tuple[str, dict[str, Any]]]:
        return self.inner.documents(tenant, ids)  # type: ignore[attr-defined, no-any-return]

    def embeddings(self, tenant: str, ids: Sequence[str]) -> dict[str, list[float]]:
        return self.inner.embeddings(tenant, ids)

    def count(self, tenant: str, where: dict[str, Any] | None = None) -> int:
        return self.inner.count(tenant, where)

    def tenants(self) -> list[str]:
        return self.inner.tenants()

    def close(self) -> None:
        self.inner.close()


class HangingVectorStore(FaultyVectorStore):
    """A FaultyVectorStore whose writes can also hang, as embedded Chroma's do on a full disk.

    While ``hang_upserts`` / ``hang_deletes`` is set, those calls block until :meth:`release`
    (and then go through to the real store, as a hung call that finally returns would).
    ``stuck`` is set once a call is blocked, so a test can wait for it.
    """

    def __init__(self, inner: VectorStore) -> None:
        super().__init__(inner)
        self.hang_upserts = False
        self.hang_deletes = False
        self.stuck = threading.Event()
        self._released = threading.Event()

    def release(self) -> None:
        self.hang_upserts = self.hang_deletes = False
        self._released.set()

    def _hang(self) -> None:
        self.stuck.set()
        self._released.wait(600)

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        if self.hang_upserts:
            self._hang()
        super().upsert(tenant, ids, embeddings, documents, metadatas)

    def delete(self, tenant: str, ids: Sequence[str]) -> None:
        if self.hang_deletes:
            self._hang()
        super().delete(tenant, ids)


class _FaultyCollection:
    def __init__(self, inner: Any, client: FaultyChromaClient) -> None:
        self._inner = inner
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def upsert(self, **kwargs: Any) -> Any:
        if self._client.write_error is not None:
            raise self._client.write_error
        return self._inner.upsert(**kwargs)

    def delete(self, **kwargs: Any) -> Any:
        if self._client.write_error is not None:
            raise self._client.write_error
        return self._inner.delete(**kwargs)


class FaultyChromaClient:
    """Wraps a chromadb client: while ``write_error`` is set, collection writes raise it."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.write_error: BaseException | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def get_or_create_collection(self, *args: Any, **kwargs: Any) -> Any:
        if self.write_error is not None:
            raise self.write_error
        return _FaultyCollection(self._inner.get_or_create_collection(*args, **kwargs), self)

    def get_collection(self, *args: Any, **kwargs: Any) -> Any:
        return _FaultyCollection(self._inner.get_collection(*args, **kwargs), self)


def _set_immutable(paths: list[Path], on: bool) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    flag = "+i" if on else "-i"
    result = subprocess.run([chattr, flag, *map(str, paths)], capture_output=True, check=False)
    return result.returncode == 0


@contextmanager
def read_only_directories(root: Path) -> Iterator[None]:
    """No new files under ``root`` while inside; skips the test if that cannot be arranged."""
    dirs = [root, *sorted(p for p in root.rglob("*") if p.is_dir())]
    as_root = os.geteuid() == 0
    modes = {d: stat.S_IMODE(d.stat().st_mode) for d in dirs}

    def undo() -> None:
        if as_root:
            _set_immutable(dirs, on=False)
        else:
            for d, mode in modes.items():
                d.chmod(mode)

    if as_root:
        if not _set_immutable(dirs, on=True):
            pytest.skip("running as root and the file system has no immutable attribute (chattr)")
    else:
        for d in dirs:
            d.chmod(0o555)
    probe = root / ".write-probe"
    try:
        probe.touch()
    except OSError:
        pass
    else:
        probe.unlink()
        undo()
        pytest.skip("could not make the data directory read-only on this machine")
    try:
        yield
    finally:
        undo()
