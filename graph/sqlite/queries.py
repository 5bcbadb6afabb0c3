"""How the SQLite store's concern objects read: on the writer's connection, under its lock, with
SQLite's failures raised as :class:`graph.api.GraphStoreError` (:mod:`graph.sqlite.errors`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from typing import Any

from graph.sqlite.db import GraphDB
from graph.sqlite.errors import sqlite_errors


class SqliteQueries:
    """The reads of one :class:`GraphDB`; every concern object of a store shares the one instance."""

    def __init__(self, db: GraphDB) -> None:
        self.db = db

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """The connection, held under the store's lock for several statements of one read."""
        with self.db.lock, sqlite_errors():
            yield self.db.conn

    def one(self, sql: str, args: Sequence[Any]) -> Any:
        with self.connection() as conn:
            return conn.execute(sql, args).fetchone()

    def all(self, sql: str, args: Sequence[Any], *, tuples: bool = False) -> list[Any]:
        """With ``tuples``, plain tuples (no ``sqlite3.Row``): what node_from_row reads positionally."""
        with self.connection() as conn, closing(conn.cursor()) as cur:
            cur.row_factory = None if tuples else cur.row_factory
            return cur.execute(sql, args).fetchall()
