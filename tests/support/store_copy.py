"""A store that crash tests copy before each kill: its data directory and, on PostgreSQL, its
database (``CREATE DATABASE ... TEMPLATE``), opened with the deterministic embedder."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from tests.support.repair_crash import open_store


@dataclass(frozen=True)
class Store:
    """A store that can be copied: its data directory and, on PostgreSQL, its database."""

    backend: str
    data_dir: Path
    admin_dsn: str = ""
    dbname: str = ""

    @classmethod
    def new(cls, backend: str, data_dir: Path, request: pytest.FixtureRequest) -> Store:
        """An empty store of ``backend`` (``sqlite``, or ``postgres`` in a fresh database of the tests' server)."""
        if backend == "sqlite":
            return cls("sqlite", data_dir)
        from psycopg.conninfo import conninfo_to_dict

        from testbed.postgres import fresh_database

        admin = request.getfixturevalue("postgres_dsn")
        return cls("postgres", data_dir, admin, str(conninfo_to_dict(fresh_database(admin))["dbname"]))

    @property
    def storage(self) -> dict[str, Any]:
        if self.backend == "sqlite":
            return {}
        from testbed.postgres import with_dbname

        return {"graph": "postgres", "postgres_dsn": with_dbname(self.admin_dsn, self.dbname)}

    def copy(self, data_dir: Path) -> Store:
        shutil.copytree(self.data_dir, data_dir)
        if self.backend == "sqlite":
            return Store(self.backend, data_dir)
        from psycopg.conninfo import conninfo_to_dict

        from testbed.postgres import fresh_database

        copied = conninfo_to_dict(fresh_database(self.admin_dsn, template=self.dbname))["dbname"]
        return Store(self.backend, data_dir, self.admin_dsn, str(copied))

    def remove(self) -> None:
        shutil.rmtree(self.data_dir)
        if self.backend != "sqlite":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(self.dbname)))

    @contextmanager
    def opened(self) -> Iterator[MemoryCore]:
        with open_store(self.data_dir, self.storage) as core:
            yield core
