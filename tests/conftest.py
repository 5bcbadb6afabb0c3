"""Shared fixtures: one suite, several backends (the registry is :mod:`tests.support.backends`).

``core`` is parametrized over the stores a user can run: the in-memory fake (fast logic), Chroma's
embedded persistent client, and Chroma in client/server mode (a real ``chroma run`` started once
per session); PostgreSQL where a test asks for it. All use the deterministic HashEmbedder; tests of
the real MiniLM model live in tests/memory_core/embedding/.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from memory_core import MemoryCore
from tests.support.backends import STORES, open_core, store_backends

if TYPE_CHECKING:
    from graph.pg import PostgresGraphStore



@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    """A real `chroma run` on 127.0.0.1 and a free port, for the client/server backend."""
    from testbed.chroma_server import running_chroma

    with running_chroma(tmp_path_factory.mktemp("chroma-server")) as address:
        yield address


@pytest.fixture(params=store_backends())
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

    if not STORES[backend].reopens:
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
    ``testbed.postgres.fresh_database(postgres_dsn)``."""
    from testbed.postgres import running_postgres

    with running_postgres() as server:
        yield server.dsn()


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    """An empty database of its own on the session's PostgreSQL server."""
    from testbed.postgres import fresh_database

    return fresh_database(postgres_dsn)


@pytest.fixture
def store(dsn: str) -> Iterator[PostgresGraphStore]:
    """A PostgresGraphStore (replica "replica-a") over that database."""
    from graph.pg import PostgresGraphStore

    s = PostgresGraphStore(dsn, owner="replica-a", retry_s=2.0)
    yield s
    s.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that takes the session's PostgreSQL server or ``chroma run`` (directly or through
    another fixture) carries the marker, so ``-m "not postgres"`` and the like select by what runs;
    the reliability harnesses are ``slow``."""
    for item in items:
        if "tests/reliability/" in item.nodeid.replace("\\", "/"):
            item.add_marker(pytest.mark.slow)  # crash, stateful and fault harnesses: make test runs them reduced
        names = set(getattr(item, "fixturenames", ()))
        if "postgres_dsn" in names:
            item.add_marker(pytest.mark.postgres)
        if "chroma_server" in names:
            item.add_marker(pytest.mark.chroma_server)
