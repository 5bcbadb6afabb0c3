"""Which durable graph a store opens: the backend registry.

``sqlite`` (the default) keeps the graph in ``<data_dir>/graph.sqlite3``: embedded, one process (the
data directory's lock refuses a second one). ``postgres`` keeps it in a PostgreSQL database; with a
Chroma server beside it nothing of the store is local, so any number of replicas (``memory-core serve
--http`` on one or several machines) serve the same tenants at once. Each backend's modules (and
psycopg) are imported only when it is opened.

:data:`BACKENDS` is the one table of backends: how each opens, and the facts the rest of the project
reads without opening it (whether one store serves several processes, which package extra its driver
comes in), so nothing outside ``graph`` names a backend. It imports the standard library only
(``python -m memory_core.extras`` reads it before the virtual environment exists).

To add a backend: a package beside ``graph/sqlite`` and ``graph/pg`` with the same module names
(``store``, ``txn``, ``timeline``, ``maintenance``, ...), and one entry in :data:`BACKENDS`.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from graph.api import GraphStore
from graph.errors import GraphConfigError
from graph.maintenance_api import GraphMaintenance

DEFAULT_BACKEND = "sqlite"


@dataclass(frozen=True)
class GraphConfig:
    """What opening a graph store needs: plain values (``memory_core`` builds it from its settings)."""

    backend: str = DEFAULT_BACKEND  # a key of BACKENDS
    root: Path = Path(".")  # the data directory (SQLite's file; the journal owner's name on PostgreSQL)
    cache_nodes: int = 50_000
    postgres_dsn: str = ""
    postgres_lease_s: float = 30.0
    postgres_pool_size: int = 4
    locked: bool = False  # this process holds the data directory's lock
    write_guard: Callable[[], None] | None = None  # called before each SQLite write (the lock's check)


@dataclass
class OpenedGraph:
    """A graph store and its maintenance seam (doctor, export/import, operator views)."""

    graph: GraphStore
    maintenance: GraphMaintenance

    def close(self) -> None:
        self.graph.close()


def replica_owner(scope: str = "") -> str:
    """This process's name in the shared journal: host, pid and a random part (pids are reused),
    then ``scope`` (see :func:`directory_scope`) when it holds a data directory's lock."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}{scope}"


def directory_scope(root: Path) -> str:
    """The journal-owner suffix of every process that held the lock of ``root`` on this host."""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{root}".encode()).hexdigest()[:16]
    return f"@dir-{digest}"


def _open_sqlite(config: GraphConfig) -> OpenedGraph:
    import sqlite3

    from graph.sqlite.db import GraphDB
    from graph.sqlite.errors import as_graph_error
    from graph.sqlite.maintenance import SqliteMaintenance
    from graph.sqlite.store import SqliteGraphStore

    try:
        db = GraphDB(config.root / "graph.sqlite3")
    except sqlite3.Error as exc:
        raise as_graph_error(exc) from exc
    try:
        if config.write_guard is not None:
            db.write_guard = config.write_guard
        return OpenedGraph(SqliteGraphStore(db, cache_nodes=config.cache_nodes), SqliteMaintenance(db))
    except sqlite3.Error as exc:
        db.close()
        raise as_graph_error(exc) from exc
    except BaseException:
        db.close()
        raise


def _open_postgres(config: GraphConfig) -> OpenedGraph:
    if not config.postgres_dsn:
        raise GraphConfigError("storage.postgres_dsn", "storage.graph = 'postgres' needs storage.postgres_dsn "
                               "(or MEMORY_CORE_STORAGE_POSTGRES_DSN).")
    try:
        from graph.pg.maintenance import PgMaintenance
        from graph.pg.store import InvalidDSNError, PostgresGraphStore
    except ImportError as exc:  # the optional extra is not installed
        extra = BACKENDS["postgres"].extra
        raise GraphConfigError("storage.graph", f"storage.graph = 'postgres' needs the {extra} extra "
                               f"(pip install 'memory-core[{extra}]').") from exc
    # the lock proves the directory's previous holders are gone: their journal entries are recovered at once
    scope = directory_scope(config.root) if config.locked else None
    try:
        store = PostgresGraphStore(config.postgres_dsn, owner=replica_owner(scope or ""),
                                   lease_s=config.postgres_lease_s, pool_size=config.postgres_pool_size,
                                   succeeds=scope, cache_nodes=config.cache_nodes)
    except InvalidDSNError as exc:
        raise GraphConfigError("storage.postgres_dsn", str(exc)) from exc
    return OpenedGraph(store, PgMaintenance(store))


@dataclass(frozen=True)
class Backend:
    """A graph backend: how it opens, and what the rest of the project may know without opening it."""

    open: Callable[[GraphConfig], OpenedGraph]
    shared: bool  # one store serves several processes or machines at once (nothing of it in a data directory)
    extra: str | None = None  # the package extra its driver comes in (pyproject's optional-dependencies)


BACKENDS: dict[str, Backend] = {
    "sqlite": Backend(_open_sqlite, shared=False),
    "postgres": Backend(_open_postgres, shared=True, extra="postgres"),
}


def graph_backend(name: str) -> Backend:
    """The registered backend ``name``; GraphConfigError for a name the registry does not hold."""
    found = BACKENDS.get(name)
    if found is None:
        raise GraphConfigError("storage.graph", f"Unknown graph backend '{name}' (one of: {', '.join(BACKENDS)}).")
    return found


def open_graph(config: GraphConfig) -> OpenedGraph:
    """The graph store ``config`` names. Raises GraphConfigError for a configuration that cannot be
    opened, GraphStoreError for a store that fails (full disk, unreachable server, newer schema)."""
    return graph_backend(config.backend).open(config)
