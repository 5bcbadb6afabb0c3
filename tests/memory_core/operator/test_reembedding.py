"""Re-embedding in place (memory_core.operator.reembedding) on embedded Chroma: the new index is built beside
the old one, an interrupted build resumes, the switch is one graph transaction, and the store then answers
like a fresh import under the new model; opening it with the old model fails EMBEDDER_MISMATCH."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import EmbedderMismatchError, InvalidInputError
from memory_core.operator.doctor.run import check_stores
from memory_core.operator.reembedding import BUILD, VECTOR_PREFIX, open_index, reembed
from memory_core.settings import load_settings

pytestmark = pytest.mark.slow  # embedded Chroma, opened several times

TEXTS = [f"{w} harvest notes for the {w} orchard, week {i}" for i, w in enumerate(
    ["kiwi", "apple", "pear", "plum", "cherry", "fig", "quince", "lemon", "lime", "peach"])]


def open_store(path: Path, dimension: int) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash", "dimension": dimension}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder(dimension))


def fill(core: MemoryCore) -> None:
    for tenant in ("acme", "globex"):
        for i, text in enumerate(TEXTS):
            core.add_memory(tenant, f"s{i % 3}", "ann", f"{tenant}: {text}")
        core.add_memory(tenant, "s1", "bob", f"{tenant}: bob's private kiwi note", visibility="agent")
        core.summarize_session(tenant, "s1")


def answers(core: MemoryCore, tenant: str) -> list[list[str]]:
    return [[m.content for m in core.recall(tenant, q, limit=5, viewer="bob").messages]
            for q in ("kiwi orchard", "week 7", "private note", "lemon and lime")]


def test_a_reembed_switches_to_the_new_model_and_answers_like_a_fresh_store(tmp_path: Path) -> None:
    with open_store(tmp_path / "fresh", 32) as fresh:
        fill(fresh)
        expected = {t: answers(fresh, t) for t in ("acme", "globex")}
    with open_store(tmp_path / "data", 64) as core:
        fill(core)
        report = reembed(core.operator_parts(), HashEmbedder(32))
        assert report.switched and report.to_dict()["to"] == "hash-bow/32" and report.old_prefix == "mc"
        assert report.embedded == {"acme": 12, "globex": 12}  # 11 memories and a session summary each
        assert core._graph.meta(VECTOR_PREFIX) == "mcr1" and not core._graph.meta(BUILD)
    with pytest.raises(EmbedderMismatchError):
        open_store(tmp_path / "data", 64)
    with open_store(tmp_path / "data", 32) as core:
        assert {t: answers(core, t) for t in ("acme", "globex")} == expected
        assert check_stores(core.operator_parts()).ok
        old = open_index(core.operator_parts(), "mc")
        assert old.tenants() == []  # the old index was dropped
        assert len(core._vectors.all_ids("globex")) == 12


def test_an_interrupted_reembed_keeps_the_old_index_in_use_and_a_rerun_resumes(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", 64) as core:
        fill(core)
        before = answers(core, "acme")
        first = reembed(core.operator_parts(), HashEmbedder(32), stop_after=15)
        assert not first.switched and sum(first.embedded.values()) == 15
    with open_store(tmp_path / "data", 64) as core:  # the old model still opens it, and answers as before
        assert answers(core, "acme") == before
        core.add_memory("acme", "s9", "ann", "acme: written while the build was paused, about kiwi")
        core.delete_memory("globex", core.recall("globex", "kiwi orchard week 0", limit=1).messages[0].ref)
        second = reembed(core.operator_parts(), HashEmbedder(32))
        assert second.resumed and second.switched
        assert second.embedded == {"acme": 1, "globex": 9}  # only what the first run left, and the new row
        assert second.removed == 1  # the deleted row (built before the pause): its record in the new index
    with open_store(tmp_path / "data", 32) as core:
        assert check_stores(core.operator_parts()).ok
        assert "acme: written while the build was paused, about kiwi" in [
            m.content for m in core.recall("acme", "paused kiwi", limit=3).messages]
        with pytest.raises(InvalidInputError):
            reembed(core.operator_parts(), HashEmbedder(32))  # built with it already
        third = reembed(core.operator_parts(), HashEmbedder(16))
        assert third.prefix == "mcr2" and third.old_prefix == "mcr1"


def test_archived_rows_are_not_embedded(tmp_path: Path) -> None:
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from memory_core.operator.retention import apply_retention

    with open_store(tmp_path / "data", 64) as core:
        old = core.add_memory("acme", "s1", "ann", "an old turn", timestamp=(
            datetime.now(UTC) - timedelta(days=200)).isoformat()).ref
        core.add_memory("acme", "s1", "ann", "a new turn")
        parts = core.operator_parts()
        settings = parts.settings.model_copy(update={"retention": parts.settings.retention.model_copy(
            update={"archive_after_days": {"turn": 90}})})
        apply_retention(replace(parts, settings=settings))
        assert reembed(parts, HashEmbedder(32)).embedded == {"acme": 1}
    with open_store(tmp_path / "data", 32) as core:
        assert old not in core._vectors.all_ids("acme") and check_stores(core.operator_parts()).ok
