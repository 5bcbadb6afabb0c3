"""Closing a core releases embedded Chroma's files: a process that opens and closes stores (a test
suite, an operator's script, the shared server switching data directories) must not run out of
file descriptors. Before ``ChromaVectorStore.close`` released its client, each open kept ~12 (the
HNSW files, Chroma's SQLite handles, its threads' event fds) until the process ended."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.vectors.chroma import ChromaVectorStore

FD_DIR = Path("/proc/self/fd")
pytestmark = pytest.mark.skipif(not FD_DIR.is_dir(), reason="counts open files through /proc")


def _open_files() -> int:
    return len(os.listdir(FD_DIR))


def _use_and_close(data_dir: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    core = MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())
    ref = core.add_memory("acme", "s1", "alice", "the deploy key rotates on Fridays").ref
    assert [m.ref for m in core.recall("acme", "deploy key").messages] == [ref]
    core.close()


def test_opening_and_closing_embedded_stores_does_not_accumulate_open_files(tmp_path: Path) -> None:
    _use_and_close(tmp_path / "warm")  # imports, thread pools and caches that live for the process
    before = _open_files()
    for i in range(5):
        _use_and_close(tmp_path / f"data-{i}")
    assert _open_files() - before <= 3, "each closed store kept files open"


def test_a_closed_store_opens_a_client_again_on_its_next_call(tmp_path: Path) -> None:
    """A caller that passes its own store to ``MemoryCore.open`` may close a core and open another on it."""
    store = ChromaVectorStore.persistent(tmp_path / "chroma")
    store.upsert("acme", ["mem:1"], [[1.0, 0.0]], ["a note"], [{"tenant": "acme"}])
    store.close()
    assert store.count("acme") == 1
    store.close()
