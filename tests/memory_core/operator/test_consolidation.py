"""Consolidation (memory_core.operator.consolidation): near-duplicates become one canonical version,
never across tenants or visibilities, reversibly, and a rerun changes nothing."""

from __future__ import annotations

import pytest

from graph.api import RowFilter
from memory_core import MemoryCore
from memory_core.errors import LockedError, NotFoundError, SupersededError
from memory_core.operator.consolidation import (
    ConsolidationReport,
    consolidate,
    plan_tenant,
    undo_merge,
    words,
    words_match,
    write_merges,
)
from memory_core.operator.doctor.run import check_stores
from memory_core.refs import memory_ref
from memory_core.versions.chain import MERGED

FACT = "the staging database runs on postgres sixteen behind pgbouncer"
COPIES = [FACT, "The staging database runs on Postgres sixteen, behind pgbouncer.",
          "note: the staging database runs on postgres sixteen behind pgbouncer"]
OTHER = "lunch orders go to the thai place on fridays"


def current(core: MemoryCore, tenant: str, viewer: str | None = None) -> list[str]:
    return sorted(m.content for m in core.recall(tenant, "", limit=50, viewer=viewer, collapse=False).messages)


def add(core: MemoryCore, tenant: str, text: str, agent: str = "alice", **fields: object) -> str:
    return core.add_memory(tenant, "s1", agent, text, type="note", **fields).ref  # type: ignore[arg-type]


def test_near_duplicates_merge_into_one_canonical_version_that_names_the_others(core: MemoryCore) -> None:
    refs = [add(core, "acme", t, agent=a) for t, a in zip(COPIES, ("alice", "bob", "carol"), strict=True)]
    add(core, "acme", OTHER)
    report = consolidate(core.operator_parts())
    assert report.rows_retired == 2 and len(report.merges) == 1
    canonical = report.merges[0][1]
    assert canonical is not None and canonical not in refs
    row = core.check_memory("acme", canonical).memory
    assert current(core, "acme") == sorted([row.content, OTHER]) and row.content in COPIES
    mark = row.metadata[MERGED]
    assert sorted(mark["merged"]) == sorted(refs) and mark["kept"] in refs
    assert {a["agent"] for a in mark["also"]} | {row.agent} == {"alice", "bob", "carol"}
    assert all(a["timestamp"] for a in mark["also"])
    for ref in refs:  # every merged row is one version older than the canonical, and reads as such
        versions = core.check_memory("acme", ref).neighbours["versions"]
        assert versions[-1]["ref"] == canonical
        with pytest.raises(SupersededError):
            core.update_memory_as_operator("acme", ref, content="edit")
    parts = core.operator_parts()
    assert parts.vectors.existing_ids("acme", [*refs, canonical]) == {canonical}  # merged rows leave the index
    assert [m.ref for m in core.recall("acme", "staging database", include_superseded=True, limit=10).messages] == [
        canonical]
    assert check_stores(parts).ok


def test_merged_rows_leave_lexical_search_and_come_back_with_undo(core: MemoryCore) -> None:
    """Found by bench.quality.consolidation: the merged rows stayed in the full-text indexes, took places
    of the lexical branch's pool (recall then refused them) and pushed other turns' evidence out of it."""
    refs = [add(core, "acme", t) for t in COPIES]
    canonical = consolidate(core.operator_parts()).merges[0][1]
    assert canonical is not None
    g, lexical = core.operator_parts().graph, RowFilter("acme")

    def found() -> set[str]:
        window = g.lexical_window(lexical, ["staging", "postgres", "pgbouncer"], 10)
        phrases = g.lexical_phrases(lexical, ["staging database"], 10)
        return {memory_ref(h.id) for h in (*window, *phrases)}

    assert found() == {canonical}
    undo_merge(core.operator_parts(), "acme", canonical)
    assert found() == set(refs)


def test_a_rerun_merges_nothing_more(core: MemoryCore) -> None:
    for t in COPIES:
        add(core, "acme", t)
    assert consolidate(core.operator_parts()).rows_retired == 2
    again = consolidate(core.operator_parts())
    assert again.merges == [] and again.scanned == {"acme": 1}


def test_a_dry_run_writes_nothing_and_names_what_would_merge(core: MemoryCore) -> None:
    refs = [add(core, "acme", t) for t in COPIES]
    report = consolidate(core.operator_parts(), dry_run=True)
    assert [sorted(m.to_dict()["merged"]) for m, ref in report.merges] == [sorted(refs)]
    assert report.merges[0][1] is None and report.to_dict()["rows_retired"] == 2
    assert len(current(core, "acme")) == 3


@pytest.mark.parametrize(("a", "b"), [
    ("the api listens on port 5433 in staging", "the api listens on port 5434 in staging"),
    ("we use postgres for the billing service", "we do not use postgres for the billing service"),
    ("deploys go out on tuesday after the review", "lunch orders go out on tuesday after the review meeting"),
])
def test_rows_that_differ_in_numbers_negation_or_words_stay_apart(core: MemoryCore, a: str, b: str) -> None:
    add(core, "acme", a)
    add(core, "acme", b)
    assert consolidate(core.operator_parts()).merges == []
    assert len(current(core, "acme")) == 2


def test_word_rules() -> None:
    assert words_match(words(COPIES[0]), words(COPIES[1]), 0.6)
    assert not words_match(words("port 5433"), words("port 5434"), 0.0)
    assert not words_match(words("it isn't ready"), words("it is ready"), 0.0)


def test_identical_rows_of_two_tenants_never_merge_and_a_tenant_run_touches_only_its_tenant(
        core: MemoryCore) -> None:
    for tenant in ("acme", "globex"):
        add(core, tenant, COPIES[0])
    assert consolidate(core.operator_parts()).merges == []
    for tenant in ("acme", "globex"):
        add(core, tenant, COPIES[1])
    report = consolidate(core.operator_parts(), ["acme"])
    assert [m.tenant for m, _ref in report.merges] == ["acme"] and set(report.scanned) == {"acme"}
    assert len(current(core, "acme")) == 1 and len(current(core, "globex")) == 2
    canonical = report.merges[0][1]
    assert canonical is not None
    with pytest.raises(NotFoundError):
        core.check_memory("globex", canonical)
    with pytest.raises(NotFoundError):
        undo_merge(core.operator_parts(), "globex", canonical)


def test_private_rows_merge_only_with_their_own_authors_rows_and_never_into_shared_ones(core: MemoryCore) -> None:
    add(core, "acme", COPIES[0])  # shared
    add(core, "acme", COPIES[1], agent="bob", visibility="agent")
    add(core, "acme", COPIES[2], agent="carol", visibility="agent")
    assert consolidate(core.operator_parts()).merges == []
    add(core, "acme", COPIES[0], agent="bob", visibility="agent")
    report = consolidate(core.operator_parts())
    assert len(report.merges) == 1
    merge, canonical = report.merges[0]
    assert {m.node.agent for m in merge.members} == {"bob"}
    assert canonical is not None
    row = core.check_memory("acme", canonical, viewer="bob").memory
    assert row.visibility == "agent" and row.agent == "bob"
    with pytest.raises(NotFoundError):
        core.check_memory("acme", canonical, viewer="carol")
    assert current(core, "acme", viewer="carol") == sorted([COPIES[0], COPIES[2]])


def test_locked_rows_and_handoffs_are_left_alone(core: MemoryCore) -> None:
    refs = [add(core, "acme", t) for t in COPIES[:2]]
    core.lock_memory("acme", refs[0])
    for _ in range(2):
        core.create_handoff("acme", "s1", "alice", "handoff: the staging database runs on postgres sixteen")
    assert consolidate(core.operator_parts()).merges == []


def test_a_cluster_a_writer_changed_since_the_plan_is_skipped(core: MemoryCore) -> None:
    refs = [add(core, "acme", t) for t in COPIES]
    _n, merges = plan_tenant(core.operator_parts(), "acme")
    core.update_memory_as_operator("acme", refs[1], content="the staging database moved to postgres seventeen")
    report = ConsolidationReport(dry_run=False)
    write_merges(core.operator_parts(), merges, report)
    assert report.merges == [] and report.skipped and report.skipped[0][1].startswith("SUPERSEDED")
    assert len(current(core, "acme")) == 3  # nothing of the refused canonical was written
    assert check_stores(core.operator_parts()).ok


def test_undo_makes_the_rows_current_again_and_later_runs_keep_them_apart(core: MemoryCore) -> None:
    refs = [add(core, "acme", t) for t in COPIES]
    canonical = consolidate(core.operator_parts()).merges[0][1]
    assert canonical is not None
    undone = undo_merge(core.operator_parts(), "acme", canonical)
    assert sorted(undone.restored) == sorted(refs)
    assert current(core, "acme") == sorted(COPIES)
    assert core.operator_parts().vectors.existing_ids("acme", [*refs, canonical]) == set(refs)
    assert core.check_memory("acme", canonical).memory.metadata[MERGED]["undone"]
    assert "versions" not in core.check_memory("acme", refs[1]).neighbours
    assert check_stores(core.operator_parts()).ok
    assert consolidate(core.operator_parts()).merges == []
    with pytest.raises(NotFoundError):
        undo_merge(core.operator_parts(), "acme", canonical)  # undone already
    with pytest.raises(NotFoundError):
        undo_merge(core.operator_parts(), "acme", refs[0])  # not a canonical


def test_undo_refuses_a_canonical_that_was_corrected_or_locked(core: MemoryCore) -> None:
    for t in COPIES:
        add(core, "acme", t)
    canonical = consolidate(core.operator_parts()).merges[0][1]
    assert canonical is not None
    core.lock_memory("acme", canonical)
    with pytest.raises(LockedError):
        undo_merge(core.operator_parts(), "acme", canonical)
    core.unlock_memory("acme", canonical)
    core.update_memory_as_operator("acme", canonical, content=FACT + " (checked)")
    with pytest.raises(SupersededError):
        undo_merge(core.operator_parts(), "acme", canonical)


def test_canonicals_merge_again_and_undo_goes_back_one_level(core: MemoryCore) -> None:
    parts = core.operator_parts()
    for t in COPIES[:2]:
        add(core, "acme", t)
    first = consolidate(parts).merges[0][1]
    add(core, "acme", COPIES[2])
    second = consolidate(parts).merges[0][1]
    assert first is not None and second is not None and len(current(core, "acme")) == 1
    undo_merge(parts, "acme", second)
    first_text = core.check_memory("acme", first).memory.content
    assert current(core, "acme") == sorted([first_text, COPIES[2]])  # the first canonical is current again
    assert core.check_memory("acme", first).memory.valid_to is None
    assert check_stores(parts).ok
