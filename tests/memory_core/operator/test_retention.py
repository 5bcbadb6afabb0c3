"""Retention (memory_core.operator.retention): per-type policies archive old rows out of recall and the
vector index, never out of the graph, exports or check_memory; a restore brings them back; one tenant's
run touches no other tenant, and an interrupted run is finished by the next (or by doctor)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError, StoreUnavailableError
from memory_core.operator import OperatorParts, export_tenant
from memory_core.operator.consolidation import consolidate
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.retention import apply_retention, restore_archived
from tests.support.faults import FaultyVectorStore

OLD = (datetime.now(UTC) - timedelta(days=120)).isoformat()
RECENT = (datetime.now(UTC) - timedelta(days=10)).isoformat()


def parts_with(core: MemoryCore, **policies: float) -> OperatorParts:
    parts = core.operator_parts()
    settings = parts.settings.model_copy(update={"retention": parts.settings.retention.model_copy(
        update={"archive_after_days": policies})})
    return replace(parts, settings=settings)


def fill(core: MemoryCore, tenant: str) -> dict[str, str]:
    return {
        "old turn": core.add_memory(tenant, "s1", "ann", f"{tenant} old turn about the kiwi harvest",
                                    timestamp=OLD).ref,
        "recent turn": core.add_memory(tenant, "s1", "ann", f"{tenant} recent turn about the kiwi harvest",
                                       timestamp=RECENT).ref,
        "old note": core.add_memory(tenant, "s1", "ann", f"{tenant} old note about the kiwi harvest", type="note",
                                    timestamp=OLD).ref,
        "old private turn": core.add_memory(tenant, "s1", "bob", f"{tenant} bob's old turn about the kiwi harvest",
                                            timestamp=OLD, visibility="agent").ref,
    }


def recalled(core: MemoryCore, tenant: str, viewer: str | None = None) -> set[str]:
    return {m.ref for m in core.recall(tenant, "kiwi harvest", limit=20, viewer=viewer, deep=True).messages}


def test_a_plan_lists_the_rows_due_and_writes_nothing(core: MemoryCore) -> None:
    refs = fill(core, "acme")
    report = apply_retention(parts_with(core, turn=90), dry_run=True)
    assert sorted(a.ref for a in report.archived) == sorted([refs["old turn"], refs["old private turn"]])
    assert report.to_dict()["by_type"] == {"turn": 2} and report.applied is False
    assert recalled(core, "acme") == {refs["old turn"], refs["recent turn"], refs["old note"]}
    assert apply_retention(core.operator_parts(), dry_run=True).archived == []  # no policy: nothing is due


def test_archived_rows_leave_recall_and_the_vector_index_but_stay_in_the_graph_and_exports(core: MemoryCore) -> None:
    refs = fill(core, "acme")
    parts = parts_with(core, turn=90)
    apply_retention(parts)
    assert recalled(core, "acme") == {refs["recent turn"], refs["old note"]}
    assert recalled(core, "acme", viewer="bob") == {refs["recent turn"], refs["old note"]}
    assert parts.vectors.existing_ids("acme", list(refs.values())) == {refs["recent turn"], refs["old note"]}
    shown = core.check_memory("acme", refs["old turn"]).memory
    assert shown.archived is not None and shown.to_dict()["archived"]
    exported = {line["ref"]: line for line in export_tenant(parts, "acme")}
    assert set(exported) == set(refs.values()) and exported[refs["old turn"]]["archived"]
    assert exported[refs["recent turn"]]["archived"] is None
    assert check_stores(parts).ok
    again = apply_retention(parts)
    assert again.archived == [] and again.finished == []
    assert consolidate(parts).scanned == {"acme": 2}  # archived rows are not consolidated


def test_a_restore_brings_rows_back_into_recall(core: MemoryCore) -> None:
    refs = fill(core, "acme")
    parts = parts_with(core, turn=90)
    apply_retention(parts)
    assert restore_archived(parts, "acme", [refs["old turn"], refs["old private turn"]]) == [
        refs["old turn"], refs["old private turn"]]
    assert recalled(core, "acme") == {refs["old turn"], refs["recent turn"], refs["old note"]}
    assert refs["old private turn"] in recalled(core, "acme", viewer="bob")
    assert core.check_memory("acme", refs["old turn"]).memory.archived is None
    assert check_stores(parts).ok
    with pytest.raises(NotFoundError):
        restore_archived(parts, "acme", [refs["recent turn"]])  # never archived


def test_a_tenant_run_touches_only_its_tenant_and_a_foreign_ref_cannot_be_restored(core: MemoryCore) -> None:
    acme, globex = fill(core, "acme"), fill(core, "globex")
    parts = parts_with(core, turn=90)
    report = apply_retention(parts, ["acme"])
    assert {a.tenant for a in report.archived} == {"acme"}
    assert recalled(core, "globex") == {globex["old turn"], globex["recent turn"], globex["old note"]}
    with pytest.raises(NotFoundError):
        restore_archived(parts, "globex", [acme["old turn"]])
    with pytest.raises(NotFoundError):
        core.check_memory("globex", acme["old turn"])
    assert acme["old turn"] not in recalled(core, "acme")


def test_locked_rows_are_not_archived(core: MemoryCore) -> None:
    refs = fill(core, "acme")
    core.lock_memory("acme", refs["old turn"])
    apply_retention(parts_with(core, turn=90))
    assert refs["old turn"] in recalled(core, "acme")


def test_an_archive_whose_vector_delete_failed_is_finished_by_the_next_run_or_by_doctor(tmp_path: Path) -> None:
    from memory_core.embedding.local import HashEmbedder
    from memory_core.settings import load_settings
    from memory_core.vectors.memory import InMemoryVectorStore

    faulty = FaultyVectorStore(InMemoryVectorStore())
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "retention": {"archive_after_days": {"turn": 90}}})
    with MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), vector_store=faulty) as c:
        refs = fill(c, "acme")
        parts = c.operator_parts()
        faulty.delete_error = StoreUnavailableError("Chroma is down.")
        with pytest.raises(StoreUnavailableError):
            apply_retention(parts)
        faulty.clear()
        assert refs["old turn"] not in recalled(c, "acme")  # the graph decided: out of recall already
        assert {f.kind for f in check_stores(parts).findings} == {"vector_archived"}
        done = apply_retention(parts)
        assert sorted(done.finished) == sorted([refs["old turn"], refs["old private turn"]])
        assert check_stores(parts).ok
        restore_archived(parts, "acme", [refs["old turn"]])
        apply_retention(parts)  # archived again: it is still old
        c._vectors.upsert("acme", [refs["old turn"]], c._embedder.embed(["x"]), ["x"], [{"tenant": "acme"}])
        report = repair_stores(parts)
        assert [r.kind for r in report.repairs] == ["vector_archived"] and report.ok
