"""Shared fixtures: one suite, several backends.

``core`` is parametrized over the vector backends a user can run: the in-memory fake
(fast logic), Chroma's embedded persistent client, and Chroma in client/server mode
(a real ``chroma run`` started once per session). All use the deterministic
HashEmbedder; tests of the real MiniLM model live in test_embedding.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import Embedder, HashEmbedder
from memory_core.settings.schema import load_settings

if TYPE_CHECKING:
    from graph.pg import PostgresGraphStore

BACKENDS = [b for b in os.environ.get("MEMORY_CORE_TEST_BACKENDS", "memory,persistent,http").split(",") if b]


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real `chroma run` on 127.0.0.1 and a free port, for the client/server backend."""
    from tests.support.chroma_server import running_chroma

    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address


def open_core(
    backend: str, data_dir: Path, request: pytest.FixtureRequest, embedder: Embedder | None = None,
    **overrides: object,
) -> MemoryCore:
    storage: dict[str, object] = {}
    if backend in ("http", "postgres"):
        host, port = request.getfixturevalue("chroma_server")
        # a distinct collection prefix per test keeps tests apart on the shared server
        storage = {"chroma": "http", "chroma_host": host, "chroma_port": port,
                   "collection_prefix": "t" + format(abs(hash(str(data_dir))) % 10**12, "d")}
    if backend == "postgres":  # the replicas' backend: PostgreSQL graph + Chroma server, one database per data dir
        storage.update(graph="postgres", postgres_dsn=_postgres_database(data_dir, request))
    settings = load_settings(environ={}, overrides={"storage": storage, "embedding": {"provider": "hash"},
                                                    **overrides})
    return MemoryCore.open(
        data_dir, settings=settings, embedder=embedder or HashEmbedder(), in_memory_vectors=backend == "memory"
    )


def _postgres_database(data_dir: Path, request: pytest.FixtureRequest) -> str:
    """The database of ``data_dir`` (created on first use, so a reopen finds the same one)."""
    from tests.support.postgres import fresh_database

    marker = data_dir / "postgres-dsn"
    if marker.exists():
        return marker.read_text(encoding="utf-8")
    dsn = fresh_database(request.getfixturevalue("postgres_dsn"))
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(dsn, encoding="utf-8")
    return dsn


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def core(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core(backend, tmp_path / "data", request)
    yield c
    c.close()


@pytest.fixture
def reopen(backend: str, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Open the same data directory again (after closing the previous core)."""

    if backend == "memory":
        pytest.skip("the in-memory vector backend does not survive a reopen")

    def _reopen(previous: MemoryCore | None = None) -> MemoryCore:
        if previous is not None:
            previous.close()
        return open_core(backend, tmp_path / "data", request)

    return _reopen


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A real PostgreSQL server (initdb + pg_ctl on a temporary directory and a free loopback
    port) for the whole session: the admin DSN. Tests take their own database with
    ``tests.support.postgres.fresh_database(postgres_dsn)``."""
    from tests.support.postgres import running_postgres

    with running_postgres() as server:
        yield server.dsn()


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """An empty database of its own on the session's PostgreSQL server."""
    from tests.support.postgres import fresh_database

    return fresh_database(postgres_dsn)


@pytest.fixture
def store(dsn: str) -> Iterator[PostgresGraphStore]:
    """A PostgresGraphStore (replica "replica-a") over that database."""
    from graph.pg import PostgresGraphStore

    s = PostgresGraphStore(dsn, owner="replica-a", retry_s=2.0)
    yield s
    s.close()
