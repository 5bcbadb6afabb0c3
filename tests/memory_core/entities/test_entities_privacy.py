"""Alias privacy: a name or alias only agent-private memories declared is seen only by their
author, on both backends, however the entity becomes visible to others (a shared mention, a merge),
and another agent declaring it gets an entity of its own: no kind, spelling, id or recall match
of the private one reaches it (issue 37, point 10)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core, store_backends


@pytest.fixture(params=store_backends("memory", "postgres"))
def core(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    c = open_core(str(request.param), tmp_path / "data", request)
    yield c
    c.close()


def _seen(core: MemoryCore, viewer: str | None) -> dict[str, tuple[str, ...]]:
    return {e.name: e.aliases for e in core.list_entities("acme", viewer=viewer)}


@pytest.mark.slow
def test_another_agent_declaring_a_private_alias_gets_an_entity_of_its_own(core: MemoryCore) -> None:
    # issue 37, point 10: bob's "nj" used to join ann's private entity, showing him her kind, her
    # spelling and an id her private memory had created
    core.add_memory("acme", "s1", "ann", "my notes", visibility="agent", entities=[
        {"name": "Project Nightjar", "kind": "project", "aliases": ["Ann's secret codename", "NJ"]}])
    (hers,) = core.list_entities("acme", viewer="ann")
    core.add_memory("acme", "s1", "bob", "status", entities=[{"name": "nj", "aliases": ["Bird"]}])
    (his,) = core.list_entities("acme", viewer="bob")
    assert (his.name, his.aliases, his.kind) == ("nj", ("nj", "Bird"), None)
    assert his.id != hers.id and core._graph.entity("acme", hers.id, "bob") is None
    assert _seen(core, "ann") == {"Project Nightjar": ("Project Nightjar", "Ann's secret codename", "NJ"),
                                  "nj": ("nj", "Bird")}
    for viewer in ("bob", None):
        node = core._graph.entity_by_name("acme", "bird", viewer)
        assert node is not None and node.id == his.id and node.kind is None
        assert core._graph.entity_by_name("acme", "ann's secret codename", viewer) is None
        assert core._graph.entity_ids("acme", ["Project Nightjar", "Ann's secret codename"], viewer) == {}
    mine = core._graph.entity_by_name("acme", "NJ", "ann")
    assert mine is not None and mine.id == hers.id  # her own name still names her entity for her


def test_her_private_name_in_another_case_or_spacing_is_no_way_in_either(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "mine", visibility="agent",
                    entities=[{"name": "Project Nightjar", "kind": "project"}])
    (hers,) = core.list_entities("acme", viewer="ann")
    core.add_memory("acme", "s1", "bob", "shared", entities=[{"name": "  project   NIGHTJAR "}])
    core.add_memory("acme", "s1", "cat", "hers too", visibility="agent", entities=[{"name": "PROJECT nightjar"}])
    (bobs,) = core.list_entities("acme", viewer="bob")
    assert (bobs.name, bobs.kind) == ("project NIGHTJAR", None) and bobs.id != hers.id
    # cat's private declaration joins what cat may see: bob's shared entity, never ann's
    assert [e.id for e in core.list_entities("acme", viewer="cat")] == [bobs.id]
    assert {e.id for e in core.list_entities("acme", viewer="ann")} == {hers.id, bobs.id}
    (again,) = [e for e in core.list_entities("acme", viewer="ann") if e.id == hers.id]
    assert (again.name, again.kind) == ("Project Nightjar", "project")  # her view is untouched


def test_recall_does_not_resolve_another_agents_private_name(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "kickoff for the migration", visibility="agent",
                    entities=[{"name": "Nightjar", "aliases": ["Operation Quiet Owl"]}])
    bobs = core.add_memory("acme", "s1", "bob", "status update for the week", entities=[{"name": "nightjar"}]).ref
    found = core.recall("acme", "Operation Quiet Owl", viewer="bob")
    assert all("entity" not in (m.match_reason or {}) for m in found.messages), found.messages
    assert bobs not in {m.ref for m in core.recall("acme", "Operation Quiet Owl", viewer="bob", limit=1).messages
                        if "entity" in (m.match_reason or {})}
    mine = core.recall("acme", "Operation Quiet Owl", viewer="ann")
    assert mine.messages[0].content == "kickoff for the migration"
    assert (mine.messages[0].match_reason or {}).get("entities") == ["Nightjar"]


def test_an_agents_shared_declaration_of_its_own_private_name_publishes_it(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Heron", "kind": "project", "aliases": ["ann-only-heron"]}])
    core.add_memory("acme", "s1", "bob", "n", entities=[{"name": "heron"}])  # bob's own, before ann publishes
    core.add_memory("acme", "s1", "ann", "n", entities=[{"name": "Egret", "aliases": ["ann-only-heron"]}])
    listed = {e.name: e for e in core.list_entities("acme", viewer="cat")}
    assert set(listed) == {"heron", "ann-only-heron"}  # bob's heron; ann's entity under the names she shared
    assert listed["ann-only-heron"].aliases == ("ann-only-heron", "Egret")  # "Heron" she never shared
    assert listed["ann-only-heron"].kind == "project" and listed["heron"].kind is None


def test_a_merge_does_not_publish_the_private_aliases_it_moves(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Falcon", "aliases": ["ann-only-falcon"]}])
    core.add_memory("acme", "s1", "ann", "n", entities=[{"name": "Falcon"}])
    core.add_memory("acme", "s1", "bob", "n", entities=[{"name": "Hawk"}])
    core.merge_entities("acme", "Hawk", "Falcon", viewer="ann")
    (node,) = core.list_entities("acme", viewer="bob")
    assert "ann-only-falcon" not in (node.name, *node.aliases)
    assert set(node.aliases) == {"Hawk", "Falcon"}
    assert "ann-only-falcon" in core.list_entities("acme", viewer="ann")[0].aliases
    with pytest.raises(NotFoundError):
        core.merge_entities("acme", "Hawk", "ann-only-falcon", viewer="bob")


@pytest.mark.slow
def test_another_agent_who_declares_the_same_alias_privately_gets_its_own_entity_too(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent", entities=[{"name": "Orca", "aliases": ["O-1"]}])
    core.add_memory("acme", "s1", "bob", "n", visibility="agent", entities=[{"name": "o-1"}])
    core.add_memory("acme", "s1", "cat", "n", entities=[{"name": "Orca"}])

    def seen(viewer: str) -> set[tuple[str, ...]]:
        return {e.aliases for e in core.list_entities("acme", viewer=viewer)}

    assert seen("bob") == {("o-1",), ("Orca",)}  # his own, and cat's shared one
    assert seen("cat") == {("Orca",)}
    assert seen("ann") == {("Orca", "O-1"), ("Orca",)}
    assert len({e.id for v in ("ann", "bob", "cat") for e in core.list_entities("acme", viewer=v)}) == 3


@pytest.mark.slow
def test_an_export_and_import_keep_a_private_alias_private(core: MemoryCore, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Kestrel", "aliases": ["ann-kestrel"]}])
    core.add_memory("acme", "s1", "bob", "n", entities=[{"name": "Kestrel", "aliases": ["K"]}])
    core.add_memory("acme", "s1", "ann", "n", entities=[{"name": "Kestrel"}])
    lines = [json.dumps(line) for line in export_tenant(core.operator_parts(), "acme")]
    shared_lines = [json.loads(t) for t in lines if json.loads(t)["visibility"] == "tenant"]
    assert shared_lines and "ann-kestrel" not in json.dumps([line["entities"] for line in shared_lines])
    target = open_core(str(request.node.callspec.params["core"]), tmp_path / "b", request)
    try:
        import_lines(target.operator_parts(), lines, "acme")
        assert _seen(target, "bob") == _seen(core, "bob")
        assert _seen(target, "ann") == _seen(core, "ann")
        assert "ann-kestrel" not in json.dumps(_seen(target, "bob"))
    finally:
        target.close()


def test_check_memory_lists_the_memorys_entities_as_the_viewer_sees_them(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Osprey", "kind": "project", "aliases": ["ann-osprey"]}])
    core.add_memory("acme", "s1", "ann", "n", entities=[{"name": "Osprey"}])  # ann makes "Osprey" public
    ref = core.add_memory("acme", "s1", "bob", "Osprey ships", entities=[{"name": "osprey", "aliases": ["OS"]}]).ref
    osprey = core._graph.entity_by_name("acme", "OS", "bob")
    assert osprey is not None
    as_bob = core.check_memory("acme", ref, viewer="bob").neighbours["entities"]
    assert as_bob == [{"ref": osprey.ref, "name": "Osprey", "kind": "project", "aliases": ["Osprey", "OS"]}]
    as_ann = core.check_memory("acme", ref, viewer="ann").neighbours["entities"]
    assert as_ann[0]["aliases"] == ["Osprey", "ann-osprey", "OS"]


@pytest.mark.slow
def test_the_default_entity_listing_is_bounded_and_keeps_the_most_mentioned(core: MemoryCore) -> None:
    from memory_core.entities.service import DEFAULT_LIST

    items = [{"tenant": "acme", "session": "s1", "agent": "ann", "content": f"plain note number {i}",
              "entities": [{"name": f"thing {i}"}, {"name": "Common"}]} for i in range(DEFAULT_LIST + 5)]
    core.add_memories(items)
    listed = core.list_entities("acme")
    assert len(listed) == DEFAULT_LIST and listed[0].name == "Common" and listed[0].mentions == DEFAULT_LIST + 5
    assert len(core.list_entities("acme", limit=1000)) == DEFAULT_LIST + 6


@pytest.mark.slow
def test_an_imported_line_never_joins_another_agents_private_entity(core: MemoryCore, tmp_path: Path,
                                                                    request: pytest.FixtureRequest) -> None:
    core.add_memory("acme", "s1", "ann", "mine", visibility="agent",
                    entities=[{"name": "Nightjar", "kind": "project", "aliases": ["NJ-7"]}])
    (hers,) = core.list_entities("acme", viewer="ann")
    source = open_core(str(request.node.callspec.params["core"]), tmp_path / "src", request)
    try:
        source.add_memory("acme", "s9", "bob", "from elsewhere", entities=[{"name": "nightjar", "aliases": ["nj-7"]}])
        lines = [json.dumps(line) for line in export_tenant(source.operator_parts(), "acme")]
    finally:
        source.close()
    import_lines(core.operator_parts(), lines, "acme")
    (his,) = core.list_entities("acme", viewer="bob")
    assert (his.name, his.aliases, his.kind) == ("nightjar", ("nightjar", "nj-7"), None) and his.id != hers.id
    mine = {e.id: e for e in core.list_entities("acme", viewer="ann")}
    assert (mine[hers.id].name, mine[hers.id].aliases, mine[hers.id].kind) == ("Nightjar", ("Nightjar", "NJ-7"),
                                                                              "project")
    import_lines(core.operator_parts(), lines, "acme")  # a re-import writes nothing new
    assert {e.id for e in core.list_entities("acme", viewer="ann")} == {hers.id, his.id}
