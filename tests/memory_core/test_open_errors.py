"""Opening a store that cannot be opened is a coded error (by errno / SQLite result code, never
by message text), and a failed open leaves nothing held: the next open, once fixed, works."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pytest

from graph.sqlite.errors import as_graph_error
from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.store_errors import graph_error, os_error


def open_here(data_dir: Path) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)


def test_a_graph_file_that_is_not_a_database_is_a_store_error_and_releases_the_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    (data_dir / "graph.sqlite3").write_bytes(b"this is not a SQLite database" * 100)
    with pytest.raises(MemoryCoreError) as info:
        open_here(data_dir)
    assert info.value.code == "STORE_ERROR" and info.value.fields["sqlite_error"] == "SQLITE_NOTADB"
    (data_dir / "graph.sqlite3").unlink()
    with open_here(data_dir) as core:  # the failed open closed its connection and released the lock
        core.add_memory("acme", "s1", "a", "opens once fixed")


def test_a_data_directory_path_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    data_dir.write_text("a file where the directory should be")
    with pytest.raises(MemoryCoreError) as info:
        open_here(data_dir)
    assert info.value.code == "STORE_ERROR" and info.value.fields["errno"] == "EEXIST"


@pytest.mark.parametrize(("code", "expected"), [
    (errno.ENOSPC, "STORE_FULL"), (errno.EDQUOT, "STORE_FULL"), (errno.EROFS, "STORE_READ_ONLY"),
    (errno.EACCES, "STORE_READ_ONLY"), (errno.EIO, "STORE_ERROR"),
])
def test_os_errors_map_by_errno(code: int, expected: str) -> None:
    assert os_error(OSError(code, "whatever the message says: read-only"), "testing").code == expected


@pytest.mark.parametrize(("result_code", "expected"), [
    (13, "STORE_FULL"), (8, "STORE_READ_ONLY"), (8 | (3 << 8), "STORE_READ_ONLY"), (5, "STORE_UNAVAILABLE"),
    (10, "STORE_ERROR"), (26, "STORE_ERROR"), (None, "STORE_ERROR"),
])
def test_sqlite_errors_map_by_result_code_not_by_message(result_code: int | None, expected: str) -> None:
    exc = sqlite3.OperationalError("attempt to write a readonly database or disk is full")
    if result_code is not None:
        exc.sqlite_errorcode = result_code  # type: ignore[attr-defined]
    assert graph_error(as_graph_error(exc), "testing").code == expected
