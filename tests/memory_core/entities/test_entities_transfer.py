"""Export/import carries entities, aliases, mentions and relations; a re-import writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core, store_backends

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


@pytest.fixture(params=store_backends("memory", "postgres"))
def backend_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def source(backend_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core(backend_name, tmp_path / "a", request)
    c.add_memory("acme", "s1", "ann", "the gateway timed out", entities=[
        {"name": "Payments API", "kind": "service", "aliases": ["payments-api"]}, {"name": "Alice", "kind": "person"}],
        relations=[{"from": "Alice", "to": "payments-api", "label": "owns"}])
    c.add_memory("acme", "s1", "bob", "retry", entities=[{"name": "pay svc"}, {"name": "alice"}])
    c.merge_entities("acme", "Payments API", "pay svc")
    c.add_memory("acme", "s1", "ann", "mine", visibility="agent", entities=[{"name": "Falcon"}])
    c.add_memory("globex", "g1", "zed", "x", entities=[{"name": "Globex Only"}])
    yield c
    c.close()


def _graph(core: MemoryCore, tenant: str = "acme") -> tuple[Any, ...]:
    g = core._graph
    names = {r.id: r.name for r in g.entity_records(tenant)}
    contents = g.contents(tenant, g.memory_ids(tenant))
    return (sorted((r.name, r.kind, r.aliases) for r in g.entity_records(tenant)),
            sorted((contents[m], names[e]) for m, e in g.all_mentions(tenant)),
            sorted((names[r.src], names[r.dst], r.label, contents[r.mem_id]) for r in g.all_relations(tenant)))


def _export(core: MemoryCore) -> list[str]:
    return [json.dumps(line) for line in export_tenant(core.operator_parts(), "acme")]


def test_an_import_into_an_empty_store_rebuilds_every_entity_under_its_ref(
        source: MemoryCore, backend_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    lines = _export(source)
    assert all("Globex" not in line for line in lines)
    target = open_core(backend_name, tmp_path / "b", request)
    try:
        counts = import_lines(target.operator_parts(), lines, "acme")
        assert (counts.written, counts.entities, counts.relations) == (3, 3, 1)
        assert target._graph.entity_records("acme") == source._graph.entity_records("acme")
        assert target._graph.all_mentions("acme") == source._graph.all_mentions("acme")
        assert target._graph.all_relations("acme") == source._graph.all_relations("acme")
        again = import_lines(target.operator_parts(), lines, "acme")
        assert (again.written, again.entities, again.mentions, again.relations) == (0, 0, 0, 0)
        assert _graph(target) == _graph(source)
        assert [e.name for e in target.list_entities("acme", viewer="bob")] == ["Alice", "Payments API"]
    finally:
        target.close()


def test_re_importing_an_export_into_its_own_store_writes_nothing(source: MemoryCore) -> None:
    before = _graph(source)
    counts = import_lines(source.operator_parts(), _export(source), "acme")
    assert (counts.written, counts.entities, counts.mentions, counts.relations) == (0, 0, 0, 0)
    assert _graph(source) == before


def test_an_import_where_the_refs_are_taken_joins_entities_by_name_and_keeps_every_link(
        source: MemoryCore, backend_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target = open_core(backend_name, tmp_path / "b", request)
    try:
        for i in range(6):  # take the ids the file uses
            target.add_memory("acme", "s0", "cat", f"filler {i}", entities=[{"name": f"Filler{i}"}])
        target.add_memory("acme", "s0", "cat", "old", entities=[{"name": "ALICE", "aliases": ["Al"]}])
        counts = import_lines(target.operator_parts(), _export(source), "acme")
        assert counts.remapped == 3 and counts.entities == 2  # Alice joins the entity already there
        alice = target._graph.entity_by_name("acme", "al", None)
        assert alice is not None and alice.mentions == 3 and alice.aliases == ("ALICE", "Al")
        _names, mentions, relations = _graph(target)
        assert relations == [("ALICE", "Payments API", "owns", "the gateway timed out")]
        assert ("retry", "Payments API") in mentions and ("mine", "Falcon") in mentions
        again = import_lines(target.operator_parts(), _export(source), "acme")
        assert (again.written, again.entities, again.mentions, again.relations) == (0, 0, 0, 0)
    finally:
        target.close()


def test_a_line_with_a_malformed_entity_is_refused_and_reported(source: MemoryCore, tmp_path: Path,
                                                                 request: pytest.FixtureRequest) -> None:
    line = json.loads(_export(source)[0])
    line["entities"][0]["kind"] = "Not A Kind"
    target = open_core("memory", tmp_path / "b", request)
    try:
        counts = import_lines(target.operator_parts(), [json.dumps(line)], "acme")
        assert counts.errors == 1 and counts.written == 0 and counts.error_lines[0]["code"] == "INVALID_INPUT"
        assert target._graph.entity_records("acme") == []
    finally:
        target.close()
