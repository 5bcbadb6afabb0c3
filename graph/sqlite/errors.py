"""SQLite failures as :class:`graph.api.GraphStoreError`, by result code (never message text)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from graph.api import GraphStoreError
from graph.sqlite.maintenance_errors import sqlite_kind  # the one mapping of result codes to kinds


def as_graph_error(exc: sqlite3.Error) -> GraphStoreError:
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    return GraphStoreError(sqlite_kind(exc), f"{name}: {exc}", exc)


@contextmanager
def sqlite_errors() -> Iterator[None]:
    """Re-raise any sqlite3.Error inside as a GraphStoreError."""
    try:
        yield
    except sqlite3.Error as exc:
        raise as_graph_error(exc) from exc
