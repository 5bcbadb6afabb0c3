"""The service on the PostgreSQL graph backend: configuration errors, an outage at open, and an
idempotency key two processes race on (each core here stands for one replica)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import ConfigError, StoreError
from memory_core.settings import load_settings
from memory_core.vectors.api import Metadata
from memory_core.vectors.memory import InMemoryVectorStore


def _open(data_dir: Path, **storage: object) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "storage": {"graph": "postgres", **storage}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)


def test_postgres_without_a_dsn_or_with_a_malformed_one_is_config_invalid_naming_the_key(tmp_path: Path) -> None:
    for storage in ({}, {"postgres_dsn": "host=127.0.0.1 port=notaport ==="}):
        with pytest.raises(ConfigError) as err:
            _open(tmp_path / "data", **storage)
        assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "storage.postgres_dsn"
        assert "notaport" not in err.value.message  # a DSN may hold a password: it is never repeated


@pytest.mark.slow
def test_an_unreachable_postgres_at_open_is_store_unavailable(tmp_path: Path) -> None:
    from testbed.chroma_server import free_port

    with pytest.raises(StoreError) as err:
        _open(tmp_path / "data", postgres_dsn=f"postgresql://nobody@127.0.0.1:{free_port()}/none?connect_timeout=1",
              postgres_lease_s=5)
    assert err.value.code == "STORE_UNAVAILABLE"


@pytest.fixture
def two_replicas(tmp_path: Path, dsn: str) -> Iterator[tuple[MemoryCore, MemoryCore]]:
    a, b = _open(tmp_path / "a", postgres_dsn=dsn), _open(tmp_path / "b", postgres_dsn=dsn)
    yield a, b
    a.close()
    b.close()


def _race(a: MemoryCore, b: MemoryCore, key: str, content: str) -> dict[str, str]:
    """Both replicas add the same keyed write at the same instant; returns each one's answer."""
    results: dict[str, str] = {}
    start = threading.Barrier(2)

    def add(core: MemoryCore, name: str) -> None:
        start.wait()
        results[name] = core.add_memory("acme", "s", name, content, idempotency_key=key).ref

    threads = [threading.Thread(target=add, args=(core, name)) for core, name in ((a, "a"), (b, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


def test_two_replicas_racing_on_one_idempotency_key_both_answer_with_the_one_row(
    two_replicas: tuple[MemoryCore, MemoryCore],
) -> None:
    a, b = two_replicas
    for trial in range(25):
        results = _race(a, b, f"key-{trial}", f"the same retried write {trial}")
        assert results["a"] == results["b"], f"trial {trial}: two rows for one key {results}"
    assert a._graph.count("acme") == 25 and b._graph.count("acme") == 25
    assert len(a.get_contents("acme", [f"mem:{i}" for i in a._graph.memory_ids("acme")]).found) == 25


def test_an_open_over_postgres_with_embedded_chroma_recovers_what_the_last_holder_of_the_directory_left(
    tmp_path: Path, dsn: str
) -> None:
    """The directory's lock says the previous process is gone: its in-flight add is rolled back at
    open, as on SQLite, without waiting for that process's lease (30 s by default) to run out."""
    first = _open(tmp_path / "data", postgres_dsn=dsn)
    first.add_memory("acme", "s", "ann", "acknowledged")
    with first._graph.transaction() as tx:  # an add that was in flight when the process died
        tx.journal([("add", "acme", "mem:999")])
    first.close()  # the lock is released as by a kill; the entry keeps its live lease
    with _open(tmp_path / "data", postgres_dsn=dsn) as second:
        recovered = second.operator_parts().recovered
        assert [(r["ref"], r["action"]) for r in recovered] == [("mem:999", "rolled back unacknowledged add")]
        assert second.operator_parts().maintenance.journal() == []


class _PausedAfterUpsert(InMemoryVectorStore):
    """The shared vector store; after one upsert, ``during`` runs (what another replica did while
    this one was paused between its vector write and its graph write)."""

    def __init__(self) -> None:
        super().__init__()
        self.during: Callable[[], None] | None = None

    def upsert(self, tenant: str, ids: Sequence[str], embeddings: Sequence[Sequence[float]],
               documents: Sequence[str], metadatas: Sequence[Metadata]) -> None:
        super().upsert(tenant, ids, embeddings, documents, metadatas)
        step, self.during = self.during, None
        if step is not None:
            step()


def test_an_add_whose_lease_lapsed_and_another_replica_rolled_back_is_refused_not_half_written(
        tmp_path: Path, dsn: str) -> None:
    """A replica paused past its lease (a starved heartbeat) between its vector write and its graph
    write: another replica recovers the add (deletes its vector, clears its intent). The paused one
    must not then write the graph row (an acknowledged memory with no vector: seen once under load
    in the three-replica harness); its add fails, and nothing of it is left anywhere."""
    import psycopg

    shared = _PausedAfterUpsert()
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "storage": {"graph": "postgres", "postgres_dsn": dsn}})
    a = MemoryCore.open(tmp_path / "a", settings=settings, embedder=HashEmbedder(), vector_store=shared)
    b = MemoryCore.open(tmp_path / "b", settings=settings, embedder=HashEmbedder(), vector_store=shared)
    rolled_back: list[dict[str, Any]] = []

    def lease_lapses_and_b_recovers() -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE journal SET lease_until = clock_timestamp() - interval '1 second'")
        rolled_back.extend(b._writer.recover())

    try:
        shared.during = lease_lapses_and_b_recovers
        with pytest.raises(StoreError) as err:
            a.add_memory("acme", "s1", "alice", "the kiln firing moved to Thursday")
        assert err.value.code == "STORE_UNAVAILABLE"
        assert [r["action"] for r in rolled_back] == ["rolled back unacknowledged add"]
        ref = rolled_back[0]["ref"]
        for core in (a, b):
            assert core.get_contents("acme", [ref]).found == []
        assert shared.all_ids("acme") == set()
        assert a._graph.journal_size() == 0  # type: ignore[attr-defined]
        # the replica writes again at once
        assert a.get_contents("acme", [a.add_memory("acme", "s1", "alice", "glaze order sent").ref]).found
    finally:
        a.close()
        b.close()


def test_a_replica_left_behind_by_an_upgrade_refuses_adds_with_nothing_written_and_still_reads(
        tmp_path: Path, dsn: str) -> None:
    """Another replica, of a newer version, has migrated the store while this one runs: this one's
    adds would miss what the newer schema keeps, so each is refused with a coded error naming both
    versions, nothing of it is written (no vector, no journal entry, no row), and recall still
    answers. Once the versions agree again it writes at once."""
    import psycopg

    from graph.pg.migrations import LATEST

    vectors = InMemoryVectorStore()
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "storage": {"graph": "postgres", "postgres_dsn": dsn}})
    core = MemoryCore.open(tmp_path / "a", settings=settings, embedder=HashEmbedder(), vector_store=vectors)

    def schema(version: int) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("UPDATE meta SET value = %s WHERE key = 'schema_version'", [str(version)])

    try:
        kept = core.add_memory("acme", "s1", "alice", "the kiln firing moved to Thursday").ref
        schema(LATEST + 1)
        with pytest.raises(StoreError) as err:
            core.add_memory("acme", "s1", "alice", "the glaze order was sent")
        assert err.value.code == "STORE_ERROR" and err.value.fields.get("graph_error") == "schema"
        assert f"schema version {LATEST + 1}" in err.value.message and f"version {LATEST}" in err.value.message
        assert vectors.all_ids("acme") == {kept}
        assert core._graph.count("acme") == 1 and core._graph.journal_size() == 0  # type: ignore[attr-defined]
        assert [m.ref for m in core.recall("acme", "kiln firing").messages] == [kept]
        schema(LATEST)
        again = core.add_memory("acme", "s1", "alice", "the glaze order was sent").ref
        assert vectors.all_ids("acme") == {kept, again} and core._graph.count("acme") == 2
    finally:
        core.close()
