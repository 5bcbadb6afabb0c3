"""The SQLite database under a store, for tests that read or damage it from outside the seam."""

from __future__ import annotations

from typing import Any

from graph.sqlite.db import GraphDB


def sqlite_db(core: Any) -> GraphDB | None:
    """The SQLite database of ``core``'s graph store, or None on another backend (PostgreSQL)."""
    db = getattr(core.graph, "db", None)
    return db if isinstance(db, GraphDB) else None
