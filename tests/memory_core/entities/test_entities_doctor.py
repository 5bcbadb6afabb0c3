"""Doctor and the entity graph: deletes leave nothing dangling; MENTIONS/RELATED rows that lost
their memory or entity (damage underneath the service) are found and deleted, nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.operator.doctor.run import check_stores, repair_stores
from tests.support.backends import open_core
from tests.support.sqlite import sqlite_db


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("persistent", tmp_path / "data", request)
    yield c
    c.close()


def _populate(core: MemoryCore) -> list[str]:
    refs = [core.add_memory("acme", "s1", "ann", "gateway down", entities=[{"name": "Alice"}, {"name": "Gateway"}],
                            relations=[{"from": "Alice", "to": "Gateway", "label": "owns"}]).ref,
            core.add_memory("acme", "s1", "bob", "fixed", entities=[{"name": "gateway"}]).ref,
            core.add_memory("globex", "g1", "zed", "x", entities=[{"name": "Gateway"}]).ref]
    return refs


def test_deleting_memories_leaves_no_finding_and_an_unmentioned_entity_stays(core: MemoryCore) -> None:
    refs = _populate(core)
    for ref in refs[:2]:
        assert core.delete_memory("acme", ref)
    assert check_stores(core.operator_parts()).findings == []
    assert core._graph.all_mentions("acme") == [] and len(core._graph.entity_records("acme")) == 2
    assert core.list_entities("acme") == []


def test_mentions_and_relations_whose_memory_or_entity_is_gone_are_found_and_deleted(core: MemoryCore) -> None:
    refs = _populate(core)
    assert sqlite_db(core) is not None
    with sqlite_db(core).transaction() as cur:  # damage below the service: rows removed by hand
        cur.execute("INSERT INTO mentions VALUES (777, (SELECT min(id) FROM entities), 'acme', 1, 1, 'ann')")
        cur.execute("DELETE FROM entities WHERE id = (SELECT max(id) FROM entities WHERE tenant = 'acme')")
    found = sorted((f.ref, f.detail) for f in check_stores(core.operator_parts()).findings if f.kind == "dangling_edge")
    assert sorted(ref for ref, _ in found) == sorted(["mem:777", refs[0], refs[0], refs[1]])
    assert any("RELATED" in detail for _, detail in found)
    report = repair_stores(core.operator_parts())
    assert report.ok and len([r for r in report.repairs if r.kind == "dangling_edge"]) == 4
    assert [e.name for e in core.list_entities("acme")] == ["Alice"]
    assert [e.name for e in core.list_entities("globex")] == ["Gateway"]
