"""Alias privacy: a name or alias only agent-private memories declared is seen only by their
author, on both backends, however the entity becomes visible to others (a shared mention, a merge)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError
from memory_core.operator.transfer import export_tenant, import_lines
from tests.conftest import open_core


@pytest.fixture(params=["memory", "postgres"])
def core(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    c = open_core(str(request.param), tmp_path / "data", request)
    yield c
    c.close()


def _seen(core: MemoryCore, viewer: str | None) -> dict[str, tuple[str, ...]]:
    return {e.name: e.aliases for e in core.list_entities("acme", viewer=viewer)}


def test_a_private_alias_stays_private_after_a_shared_memory_mentions_the_entity(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "my notes", visibility="agent",
                    entities=[{"name": "Project Nightjar", "aliases": ["Ann's secret codename", "NJ"]}])
    core.add_memory("acme", "s1", "bob", "status", entities=[{"name": "nj", "aliases": ["Bird"]}])
    assert _seen(core, "ann") == {"Project Nightjar": ("Project Nightjar", "Ann's secret codename", "NJ", "Bird")}
    assert _seen(core, "bob") == {"NJ": ("NJ", "Bird")}
    for viewer in ("bob", None):
        node = core.graph.entity_by_name("acme", "bird", viewer)
        assert node is not None and (node.name, node.aliases) == ("NJ", ("NJ", "Bird"))
        assert core.graph.entity_by_name("acme", "ann's secret codename", viewer) is None


def test_the_first_shared_name_is_the_display_name_others_see(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent", entities=[{"name": "Hidden Name", "aliases": ["HN"]}])
    core.add_memory("acme", "s1", "bob", "n", entities=[{"name": "hn", "aliases": ["Public"]}])
    (node,) = core.list_entities("acme", viewer="bob")
    assert node.name == "HN" and node.aliases == ("HN", "Public")
    (mine,) = core.list_entities("acme", viewer="ann")
    assert mine.name == "Hidden Name" and mine.aliases == ("Hidden Name", "HN", "Public")


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


def test_another_agent_who_declares_the_same_alias_privately_sees_it_too(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent", entities=[{"name": "Orca", "aliases": ["O-1"]}])
    core.add_memory("acme", "s1", "bob", "n", visibility="agent", entities=[{"name": "o-1"}])
    core.add_memory("acme", "s1", "cat", "n", entities=[{"name": "Orca"}])
    assert _seen(core, "bob") == {"Orca": ("Orca", "O-1")}
    assert _seen(core, "cat") == {"Orca": ("Orca",)}


def test_an_export_and_import_keep_a_private_alias_private(core: MemoryCore, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Kestrel", "aliases": ["ann-kestrel"]}])
    core.add_memory("acme", "s1", "bob", "n", entities=[{"name": "Kestrel", "aliases": ["K"]}])
    lines = [json.dumps(line) for line in export_tenant(core, "acme")]
    shared_line = next(json.loads(t) for t in lines if json.loads(t)["agent"] == "bob")
    assert "ann-kestrel" not in json.dumps(shared_line["entities"])
    target = open_core(str(request.node.callspec.params["core"]), tmp_path / "b", request)
    try:
        import_lines(target, lines, "acme")
        assert _seen(target, "bob") == {"Kestrel": ("Kestrel", "K")}
        assert _seen(target, "ann") == {"Kestrel": ("Kestrel", "ann-kestrel", "K")}
    finally:
        target.close()


def test_check_memory_lists_the_memorys_entities_as_the_viewer_sees_them(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "n", visibility="agent",
                    entities=[{"name": "Osprey", "kind": "project", "aliases": ["ann-osprey"]}])
    ref = core.add_memory("acme", "s1", "bob", "Osprey ships", entities=[{"name": "osprey", "aliases": ["OS"]}]).ref
    osprey = core.graph.entity_by_name("acme", "OS", "bob")
    assert osprey is not None
    as_bob = core.check_memory("acme", ref, viewer="bob").neighbours["entities"]
    assert as_bob == [{"ref": osprey.ref, "name": "Osprey", "kind": "project", "aliases": ["Osprey", "OS"]}]
    as_ann = core.check_memory("acme", ref, viewer="ann").neighbours["entities"]
    assert as_ann[0]["aliases"] == ["Osprey", "ann-osprey", "OS"]


def test_the_default_entity_listing_is_bounded_and_keeps_the_most_mentioned(core: MemoryCore) -> None:
    from memory_core.entities.service import DEFAULT_LIST

    items = [{"tenant": "acme", "session": "s1", "agent": "ann", "content": f"plain note number {i}",
              "entities": [{"name": f"thing {i}"}, {"name": "Common"}]} for i in range(DEFAULT_LIST + 5)]
    core.add_memories(items)
    listed = core.list_entities("acme")
    assert len(listed) == DEFAULT_LIST and listed[0].name == "Common" and listed[0].mentions == DEFAULT_LIST + 5
    assert len(core.list_entities("acme", limit=1000)) == DEFAULT_LIST + 6
