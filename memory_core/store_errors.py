"""Map operating-system and graph-store failures to coded store errors, by errno and by the kind
the graph backend decided (from SQLite result codes or PostgreSQL SQLSTATEs), never by message text.

    ENOSPC, EDQUOT;  kind "full"                            -> StoreFullError        STORE_FULL
    EROFS, EACCES, EPERM;  kind "read_only"                 -> StoreReadOnlyError    STORE_READ_ONLY
    kinds "busy", "unavailable", "conflict"                 -> StoreUnavailableError STORE_UNAVAILABLE
    anything else (EIO; kinds "io", "corrupt", "schema", …) -> StoreError            STORE_ERROR
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

from graph.api import GraphStoreError
from memory_core.errors import StoreError, StoreFullError, StoreReadOnlyError, StoreUnavailableError

_FULL_ERRNO = frozenset({errno.ENOSPC, errno.EDQUOT})
_READ_ONLY_ERRNO = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
# primary result codes (the low byte of an extended code)
_SQLITE_FULL = 13
_SQLITE_READ_ONLY = frozenset({8, 3, 23})  # SQLITE_READONLY, SQLITE_PERM, SQLITE_AUTH
_SQLITE_BUSY = frozenset({5, 6})  # SQLITE_BUSY, SQLITE_LOCKED


def os_error(exc: OSError, doing: str) -> StoreError:
    """A coded error for an OSError met while ``doing`` (a phrase: "opening the data directory")."""
    what = exc.strerror or type(exc).__name__
    fields = {"errno": errno.errorcode.get(exc.errno or 0, str(exc.errno))}
    if exc.errno in _FULL_ERRNO:
        return StoreFullError(f"The disk is full while {doing} ({what}); nothing was written.", **fields)
    if exc.errno in _READ_ONLY_ERRNO:
        return StoreReadOnlyError(f"The store is not writable while {doing} ({what}); nothing was written.",
                                  **fields)
    return StoreError(f"The store failed while {doing} ({what}).", **fields)


def graph_error(exc: GraphStoreError, doing: str) -> StoreError:
    """A coded error for a graph-store failure, by the kind the backend decided (SQLite result
    code, PostgreSQL SQLSTATE): the one place memory_core maps them."""
    fields = {"graph_error": exc.kind, **exc.fields}
    if exc.kind == "full":
        return StoreFullError(f"The disk is full while {doing} ({exc.detail}); nothing was written.", **fields)
    if exc.kind == "read_only":
        return StoreReadOnlyError(f"The graph store is read-only while {doing} ({exc.detail}); nothing was written.",
                                  **fields)
    if exc.kind in ("busy", "unavailable", "conflict"):
        return StoreUnavailableError(f"The graph store is unavailable while {doing} ({exc.detail}); try again.",
                                     **fields)
    return StoreError(f"The graph store failed while {doing} ({exc.detail}).", **fields)


@contextmanager
def graph_errors(doing: str) -> Iterator[None]:
    """Re-raise a GraphStoreError met while ``doing`` as its coded StoreError."""
    try:
        yield
    except GraphStoreError as exc:
        raise graph_error(exc, doing) from exc


P = ParamSpec("P")
R = TypeVar("R")


def coded_graph_errors(doing: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A graph-store failure met anywhere below a public method is its coded STORE_* error
    (never INTERNAL_ERROR): the reads as much as the writes, on either backend."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def coded(*args: P.args, **kwargs: P.kwargs) -> R:
            with graph_errors(doing):
                return fn(*args, **kwargs)

        return coded

    return decorate


__all__ = ["coded_graph_errors", "graph_error", "graph_errors", "os_error"]
