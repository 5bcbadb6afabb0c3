"""Recall asks which of its ~200 candidates a newer handoff SUPERSEDES. Most tenants hold no
SUPERSEDES edge at all, yet that read probed the whole-table ``edges_dst`` index once per
candidate (0.35 ms a recall at 100k memories, where every memory has two other edges). It is
held here to a cost that does not grow with the ids asked, by counting SQLite's
virtual-machine steps (not a clock), and to the same answers with chains present."""

from __future__ import annotations

from pathlib import Path

import pytest

from graph.sqlite.migrations import SCHEMA_VERSION
from graph.sqlite.store import SqliteGraphStore
from memory_core import MemoryCore
from tests.support.backends import open_core
from tests.support.sqlite import sqlite_db, vm_steps


def _fill(core: MemoryCore, tenant: str, n: int) -> list[int]:
    refs = [r.ref for start in range(0, n, 500) for r in core.add_memories([
        {"tenant": tenant, "session": f"s{i // 100}", "agent": "ann", "content": f"turn {i} about the deploy"}
        for i in range(start, min(n, start + 500))])]
    return [int(r[4:]) for r in refs]


def test_a_tenant_without_handoff_chains_answers_superseders_without_a_probe_per_id(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request)
    try:
        ids = _fill(core, "big", 1000)
        store = core._graph
        assert isinstance(store, SqliteGraphStore)
        few_steps, few = vm_steps(store.db, lambda: store.superseders("big", ids[:10]))
        many_steps, many = vm_steps(store.db, lambda: store.superseders("big", ids[:400]))
        assert few == many == {}
        assert many_steps < few_steps + 20, (few_steps, many_steps)  # was ~40 steps an id
    finally:
        core.close()


def test_superseders_name_the_newer_handoffs_of_the_tenant_only(tmp_path: Path,
                                                                request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request)
    try:
        ids = _fill(core, "t1", 50)
        first = int(core.create_handoff("t1", "s0", "ann", "handoff one").ref[4:])
        second = int(core.create_handoff("t1", "s0", "ann", "handoff two").ref[4:])
        other = int(core.create_handoff("t2", "s0", "ann", "another tenant's handoff").ref[4:])
        int(core.create_handoff("t2", "s0", "ann", "its successor").ref[4:])
        store = core._graph
        assert isinstance(store, SqliteGraphStore)
        found = store.superseders("t1", [*ids, first, second, other])
        assert found == {first: [second]}
        assert store.superseders("t1", [other]) == {}  # another tenant's chain reads as absent
    finally:
        core.close()


def test_a_step_7_store_gains_the_chain_index_and_keeps_its_chains(tmp_path: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    core = open_core("memory", tmp_path / "data", request)
    try:
        first = int(core.create_handoff("t1", "s0", "ann", "handoff one").ref[4:])
        second = int(core.create_handoff("t1", "s0", "ann", "handoff two").ref[4:])
        assert sqlite_db(core) is not None
        with sqlite_db(core).transaction() as cur:  # what step 7 held: no partial index of the chains
            cur.execute("DROP INDEX edges_supersedes")
            cur.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    finally:
        core.close()
    core = open_core("memory", tmp_path / "data", request)
    try:
        assert sqlite_db(core) is not None and sqlite_db(core).meta("schema_version") == str(SCHEMA_VERSION)
        assert core._graph.superseders("t1", [first, second]) == {first: [second]}
    finally:
        core.close()
