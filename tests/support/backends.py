"""The backend registry of the suite: every store a user can run, and how a test opens one.

One suite, several backends: a test takes ``core`` (parametrized over :data:`DEFAULT`) or asks for
the backends it needs with :func:`store_backends` / :func:`graph_backends`. Each parameter carries
the markers of what it starts, so ``-m "not postgres"`` leaves out every PostgreSQL case and
``-m "not chroma_server"`` every ``chroma run`` one.

Store backends (a whole MemoryCore):
    memory      in-memory vectors + SQLite graph     (fast logic)
    persistent  embedded Chroma + SQLite graph       (the default a user runs)
    http        a real ``chroma run`` + SQLite graph (client/server vectors)
    postgres    a real ``chroma run`` + PostgreSQL   (the replicas' stores)
    postgres-embedded  embedded Chroma + PostgreSQL (one process, a data directory's lock)
Graph backends (a GraphStore alone): sqlite, postgres.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.structures import ParameterSet

from graph.open import BACKENDS
from memory_core import MemoryCore
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings


@dataclass(frozen=True)
class StoreBackend:
    name: str
    vectors: str  # "memory" | "embedded" | "http"
    graph: str  # "sqlite" | "postgres"

    @property
    def marks(self) -> list[pytest.MarkDecorator]:
        marks = [pytest.mark.chroma_server] if self.vectors == "http" else []
        return marks + ([pytest.mark.postgres] if self.graph == "postgres" else [])

    @property
    def reopens(self) -> bool:
        """Whether a store of this backend survives closing and opening again."""
        return self.vectors != "memory"


STORES = {b.name: b for b in (StoreBackend("memory", "memory", "sqlite"),
                              StoreBackend("persistent", "embedded", "sqlite"),
                              StoreBackend("http", "http", "sqlite"),
                              StoreBackend("postgres", "http", "postgres"),
                              StoreBackend("postgres-embedded", "embedded", "postgres"))}
GRAPHS = tuple(BACKENDS)  # graph.open's registry: a backend registered there joins every graph test
# the `core` fixture's backends: MEMORY_CORE_TEST_BACKENDS narrows or widens them
DEFAULT = tuple(b for b in os.environ.get("MEMORY_CORE_TEST_BACKENDS", "memory,persistent,http").split(",") if b)


def store_backends(*names: str) -> list[ParameterSet]:
    """Parameters for ``names`` (default: :data:`DEFAULT`), each marked with what it starts."""
    return [pytest.param(n, marks=STORES[n].marks, id=n) for n in (names or DEFAULT)]


def graph_backends(*names: str) -> list[ParameterSet]:
    """Parameters for graph backends (default: every one), PostgreSQL marked."""
    return [pytest.param(n, marks=[pytest.mark.postgres] if n == "postgres" else [], id=n)
            for n in (names or GRAPHS)]


def open_core(backend: str, data_dir: Path, request: pytest.FixtureRequest, embedder: Embedder | None = None,
              **overrides: Any) -> MemoryCore:
    """A MemoryCore of ``backend`` on ``data_dir`` (the same directory reopens the same store)."""
    spec = STORES[backend]
    storage: dict[str, object] = {}
    if spec.vectors == "http":
        host, port = request.getfixturevalue("chroma_server")
        # a distinct collection prefix per test keeps tests apart on the shared server
        storage = {"chroma": "http", "chroma_host": host, "chroma_port": port,
                   "collection_prefix": "t" + format(abs(hash(str(data_dir))) % 10**12, "d")}
    if spec.graph == "postgres":  # one database per data dir
        storage.update(graph="postgres", postgres_dsn=postgres_database(data_dir, request))
    settings = load_settings(environ={}, overrides={"storage": storage, "embedding": {"provider": "hash"},
                                                    **overrides})
    return MemoryCore.open(data_dir, settings=settings, embedder=embedder or HashEmbedder(),
                           in_memory_vectors=spec.vectors == "memory")


def postgres_database(data_dir: Path, request: pytest.FixtureRequest) -> str:
    """The database of ``data_dir`` on the session's PostgreSQL server (created on first use, so a
    reopen finds the same one)."""
    from testbed.postgres import fresh_database

    marker = data_dir / "postgres-dsn"
    if marker.exists():
        return marker.read_text(encoding="utf-8")
    dsn = fresh_database(request.getfixturevalue("postgres_dsn"))
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(dsn, encoding="utf-8")
    return dsn
