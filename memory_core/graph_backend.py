"""Which durable graph a store opens: SQLite in the data directory, or PostgreSQL for replicas.

``storage.graph = "sqlite"`` (the default) keeps the graph in ``<data_dir>/graph.sqlite3``:
embedded, one process (the data directory's lock refuses a second one). ``"postgres"`` keeps it
in ``storage.postgres_dsn``; with ``storage.chroma = "http"`` nothing of the store is local, so
any number of replicas (``memory-core serve --http`` on one or several machines) serve the same
tenants at once and no directory lock is taken. psycopg is imported only for that backend.
"""

from __future__ import annotations

import hashlib
import os
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from graph.api import GraphStore
from graph.maintenance_api import GraphMaintenance
from graph.sqlite.db import GraphDB
from memory_core.errors import ConfigError
from memory_core.settings.schema import Settings


@dataclass
class OpenedGraph:
    graph: GraphStore
    maintenance: GraphMaintenance
    db: GraphDB | None  # the SQLite database (None on PostgreSQL)

    def close(self) -> None:
        self.graph.close()


def is_replicated(settings: Settings) -> bool:
    """True when nothing of the store lives in the data directory: PostgreSQL and a Chroma server."""
    return settings.storage.graph == "postgres" and settings.storage.chroma == "http"


def replica_owner(scope: str = "") -> str:
    """This process's name in the shared journal: host, pid and a random part (pids are reused),
    then ``scope`` (see :func:`directory_scope`) when it holds a data directory's lock."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}{scope}"


def directory_scope(root: Path) -> str:
    """The journal-owner suffix of every process that held the lock of ``root`` on this host."""
    digest = hashlib.sha256(f"{socket.gethostname()}\0{root}".encode()).hexdigest()[:16]
    return f"@dir-{digest}"


def open_graph(settings: Settings, root: Path, *, locked: bool = False) -> OpenedGraph:
    """The graph store of ``settings``. ``locked``: this process holds ``root``'s lock, so on
    PostgreSQL the journal entries of the directory's previous holders are recovered at once
    (the lock proves that process is gone; a replica without a lock waits for the lease)."""
    st = settings.storage
    if st.graph == "sqlite":
        from graph.sqlite.maintenance import SqliteMaintenance
        from graph.sqlite.store import SqliteGraphStore

        db = GraphDB(root / "graph.sqlite3")
        try:
            return OpenedGraph(SqliteGraphStore(db, cache_nodes=st.graph_cache_nodes), SqliteMaintenance(db), db)
        except BaseException:
            db.close()
            raise
    if not st.postgres_dsn:
        raise ConfigError("storage.graph = 'postgres' needs storage.postgres_dsn "
                          "(or MEMORY_CORE_STORAGE_POSTGRES_DSN).",
                          key="storage.postgres_dsn")
    try:
        from graph.pg.maintenance import PgMaintenance
        from graph.pg.store import InvalidDSNError, PostgresGraphStore
    except ImportError as exc:  # the optional extra is not installed
        raise ConfigError("storage.graph = 'postgres' needs the postgres extra (pip install 'memory-core[postgres]').",
                          key="storage.graph") from exc
    scope = directory_scope(root) if locked else None
    try:
        store = PostgresGraphStore(st.postgres_dsn, owner=replica_owner(scope or ""), lease_s=st.postgres_lease_s,
                                   pool_size=st.postgres_pool_size, succeeds=scope, cache_nodes=st.graph_cache_nodes)
    except InvalidDSNError as exc:
        raise ConfigError(str(exc), key="storage.postgres_dsn") from exc
    return OpenedGraph(store, PgMaintenance(store), None)
