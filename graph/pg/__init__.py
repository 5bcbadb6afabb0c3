"""The PostgreSQL graph store: :class:`PostgresGraphStore` (see :mod:`graph.pg.store`)."""

from graph.pg.store import InvalidDSNError, LeasedJournalEntry, PostgresGraphStore

__all__ = ["InvalidDSNError", "LeasedJournalEntry", "PostgresGraphStore"]
