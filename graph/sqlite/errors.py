"""SQLite and OS failures as :class:`graph.errors.GraphStoreError`, by SQLite result code or errno
(never message text): the one table of result codes, for the store, its transactions and maintenance."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from graph.errors import ErrorKind, GraphStoreError

_FULL = 13  # SQLITE_FULL
_READ_ONLY = frozenset({8, 3, 23})  # SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH
_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED
_CORRUPT = frozenset({11, 26})  # SQLITE_CORRUPT (and _VTAB), SQLITE_NOTADB
_FULL_ERRNO = frozenset({errno.ENOSPC, errno.EDQUOT})
_READ_ONLY_ERRNO = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def sqlite_kind(exc: sqlite3.Error) -> ErrorKind:
    """The kind of a SQLite failure from its primary result code; a closed connection (no code,
    ``ProgrammingError``) is ``unavailable``."""
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
    if primary is None and isinstance(exc, sqlite3.ProgrammingError):
        return "unavailable"
    return "io"


def os_kind(exc: OSError) -> ErrorKind:
    if exc.errno in _FULL_ERRNO:
        return "full"
    if exc.errno in _READ_ONLY_ERRNO:
        return "read_only"
    return "io"


def graph_error(exc: sqlite3.Error | OSError, doing: str) -> GraphStoreError:
    if isinstance(exc, OSError):
        what = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
        return GraphStoreError(os_kind(exc), f"{doing}: {what}: {exc.strerror or exc}", exc)
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return GraphStoreError(sqlite_kind(exc), f"{doing}: {name}: {exc}", exc, {"sqlite_error": name})


@contextmanager
def store_errors(doing: str) -> Iterator[None]:
    """Re-raise a sqlite3.Error or OSError met while ``doing`` (a phrase) as a GraphStoreError."""
    try:
        yield
    except (sqlite3.Error, OSError) as exc:
        raise graph_error(exc, doing) from exc


def as_graph_error(exc: sqlite3.Error) -> GraphStoreError:
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return GraphStoreError(sqlite_kind(exc), f"{name}: {exc}", exc, {"sqlite_error": name})


@contextmanager
def sqlite_errors() -> Iterator[None]:
    """Re-raise any sqlite3.Error inside as a GraphStoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise as_graph_error(exc) from exc
