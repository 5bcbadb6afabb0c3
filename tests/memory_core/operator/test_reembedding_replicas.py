"""Re-embedding a replicated store (PostgreSQL graph, a Chroma server): the replica that runs it switches in
place; another replica that did not learns of it from the store's recorded model and prefix and answers
EMBEDDER_MISMATCH from then on, never writing into the index that was dropped. Real PostgreSQL and a real
``chroma run``; two replicas as two cores in this process (each with its own lock, as two processes)."""

from __future__ import annotations

import secrets

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import EmbedderMismatchError
from memory_core.operator.reembedding import open_index, reembed
from memory_core.settings import load_settings

pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.chroma_server]


def replica(dsn: str, chroma: tuple[str, int], prefix: str, dimension: int) -> MemoryCore:
    settings = load_settings(environ={}, overrides={
        "embedding": {"provider": "hash", "dimension": dimension},
        "storage": {"graph": "postgres", "postgres_dsn": dsn, "chroma": "http", "chroma_host": chroma[0],
                    "chroma_port": chroma[1], "collection_prefix": prefix}})
    return MemoryCore.open(settings=settings, embedder=HashEmbedder(dimension))


def test_a_replica_that_did_not_reembed_answers_embedder_mismatch_and_writes_nothing_to_the_old_index(
        postgres_dsn: str, chroma_server: tuple[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    from testbed.postgres import fresh_database

    dsn, prefix = fresh_database(postgres_dsn), "rr" + secrets.token_hex(3)
    monkeypatch.setattr("memory_core.service.REPLICA_CHECK_S", 0.0)  # every read looks (production: every 2 s)
    with replica(dsn, chroma_server, prefix, 64) as a, replica(dsn, chroma_server, prefix, 64) as b:
        for i in range(20):
            (a if i % 2 else b).add_memory("acme", "s1", "ann", f"kiwi orchard note {i}")
        assert len(b.recall("acme", "kiwi orchard", limit=5).messages) == 5
        report = reembed(a.operator_parts(), HashEmbedder(32))
        assert report.switched and report.prefix == f"{prefix}r1"
        assert len(a.recall("acme", "kiwi orchard", limit=5).messages) == 5  # the replica that ran it: switched
        a.add_memory("acme", "s1", "ann", "kiwi orchard note written after the switch")
        for call in (lambda: b.recall("acme", "kiwi orchard"),
                     lambda: b.add_memory("acme", "s1", "bob", "a write into the dropped index")):
            with pytest.raises(EmbedderMismatchError, match="re-embedded by another process"):
                call()
        old = open_index(a.operator_parts(), prefix)
        try:
            assert old.tenants() == []  # dropped, and not created again by the stale replica's write
        finally:
            old.close()
        assert "a write into the dropped index" not in [
            m.content for m in a.recall("acme", "dropped index", limit=30, collapse=False).messages]
    with replica(dsn, chroma_server, prefix, 32) as c:  # restarted with the new model: it serves the new index
        assert len(c.recall("acme", "kiwi orchard", limit=30, collapse=False).messages) == 21
    with pytest.raises(EmbedderMismatchError):
        replica(dsn, chroma_server, prefix, 64)
