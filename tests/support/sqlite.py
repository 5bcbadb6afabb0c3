"""The SQLite database under a store, for tests that read or damage it from outside the seam."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from graph.sqlite.db import GraphDB

T = TypeVar("T")


def sqlite_db(core: Any) -> GraphDB | None:
    """The SQLite database of ``core``'s graph store, or None on another backend (PostgreSQL)."""
    db = getattr(core._graph, "db", None)
    return db if isinstance(db, GraphDB) else None


def vm_steps(db: GraphDB, read: Callable[[], T], every: int = 1) -> tuple[int, T]:
    """How many SQLite virtual-machine steps (in units of ``every``) ``read`` takes, and its result:
    a read's cost without a clock, so a test can show it does not grow with the data."""
    steps = [0]

    def tick() -> int:
        steps[0] += 1
        return 0

    db.conn.set_progress_handler(tick, every)
    try:
        found = read()
    finally:
        db.conn.set_progress_handler(None, every)
    return steps[0], found
