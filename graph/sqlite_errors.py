"""SQLite failures as :class:`graph.api.GraphStoreError`, by result code (never message text)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from graph.api import ErrorKind, GraphStoreError

_FULL = 13  # SQLITE_FULL
_READ_ONLY = frozenset({8, 3, 23})  # SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH
_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def kind_of(exc: sqlite3.Error) -> ErrorKind:
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == _FULL:
        return "full"
    if primary in _READ_ONLY:
        return "read_only"
    if primary in _BUSY:
        return "busy"
    if primary in _CORRUPT:
        return "corrupt"
    return "io"


def as_graph_error(exc: sqlite3.Error) -> GraphStoreError:
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return GraphStoreError(kind_of(exc), f"{name}: {exc}", exc)


@contextmanager
def sqlite_errors() -> Iterator[None]:
    """Re-raise any sqlite3.Error inside as a GraphStoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise as_graph_error(exc) from exc
