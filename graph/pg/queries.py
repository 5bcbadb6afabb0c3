"""How the PostgreSQL store's concern objects reach the database: a pooled connection (autocommit;
a read opens a transaction when it needs one snapshot), transient failures (connection lost, server
restarting) retried for ``retry_s`` seconds, every failure a :class:`graph.api.GraphStoreError`
naming what was being done (:mod:`graph.pg.errors`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql
from psycopg_pool import ConnectionPool

from graph.pg.errors import retrying, wrap

T = TypeVar("T")
Query = str | sql.SQL | sql.Composed


class PgQueries:
    """The reads of one pool; every concern object of a store shares the one instance."""

    def __init__(self, pool: ConnectionPool, retry_s: float) -> None:
        self.pool = pool
        self.retry_s = retry_s

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str = "read", *, retry: bool = True) -> T:
        """``fn`` on a pooled connection, retried on transient failures unless ``retry`` is False."""
        def attempt() -> T:
            with self.pool.connection() as conn:
                return fn(conn)

        if not retry:
            try:
                return attempt()
            except psycopg.Error as exc:
                raise wrap(exc, what) from exc
        return retrying(attempt, what, self.retry_s)

    def rows(self, query: Query, args: list[Any], what: str = "read") -> list[tuple[Any, ...]]:
        """Every row of one statement."""
        found: list[tuple[Any, ...]] = self.run(lambda c: c.execute(query, args).fetchall(), what)
        return found
