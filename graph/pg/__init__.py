"""The PostgreSQL graph store: :class:`PostgresGraphStore` (see :mod:`graph.pg.store`)."""

from graph.pg.journal import LeasedJournalEntry
from graph.pg.store import InvalidDSNError, PostgresGraphStore

__all__ = ["InvalidDSNError", "LeasedJournalEntry", "PostgresGraphStore"]
