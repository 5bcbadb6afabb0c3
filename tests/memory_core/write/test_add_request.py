"""One add request: the fields a caller may give a memory are one type (``memory_core.write.request``), and
every add entry point refuses a field it does not know with INVALID_INPUT naming it, writing nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import InvalidInputError
from memory_core.operator.export_format import NOT_ADDED, ExportLine
from memory_core.settings import load_settings
from memory_core.write.request import ADD_FIELD_NAMES, ADD_ITEM_NAMES, MEMORY_FIELD_NAMES, AddFields, MemoryFields


@pytest.fixture
def core(tmp_path: Path) -> Iterator[MemoryCore]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    with MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder()) as opened:
        yield opened


def assert_nothing_written(core: MemoryCore) -> None:
    assert core._graph.count("acme") == 0 and core._graph.journal() == []


def test_the_field_names_derive_from_the_types() -> None:
    assert frozenset(MemoryFields.__optional_keys__) == MEMORY_FIELD_NAMES
    assert ADD_FIELD_NAMES == MEMORY_FIELD_NAMES | {"type"} == frozenset(AddFields.__optional_keys__)
    assert ADD_FIELD_NAMES | {"tenant", "session", "agent", "content"} == ADD_ITEM_NAMES
    assert not AddFields.__required_keys__  # every field may be left out: it then takes its default


def test_add_memory_refuses_an_option_it_does_not_know_and_names_it(core: MemoryCore) -> None:
    with pytest.raises(InvalidInputError) as caught:
        core.add_memory("acme", "s1", "alice", "the deploy is on Friday", visibilty="agent")  # type: ignore[call-arg]
    assert caught.value.code == "INVALID_INPUT" and caught.value.fields["field"] == "visibilty"
    assert "visibilty" in caught.value.message
    assert_nothing_written(core)


def test_add_memory_of_type_handoff_refuses_an_unknown_option_too(core: MemoryCore) -> None:
    with pytest.raises(InvalidInputError) as caught:
        core.add_memory("acme", "s1", "alice", "next: ship it", type="handoff", ttl=3)  # type: ignore[call-arg]
    assert caught.value.fields["field"] == "ttl"
    assert_nothing_written(core)


def test_create_handoff_refuses_an_option_it_does_not_know_and_a_type(core: MemoryCore) -> None:
    for bad in ({"priority": "high"}, {"type": "note"}):
        with pytest.raises(InvalidInputError) as caught:
            core.create_handoff("acme", "s1", "alice", "next: ship it", **bad)  # type: ignore[arg-type]
        assert caught.value.fields["field"] == next(iter(bad))
    assert_nothing_written(core)


def test_add_memories_names_the_unknown_key_of_an_item(core: MemoryCore) -> None:
    items = [{"tenant": "acme", "session": "s1", "agent": "alice", "content": "fine"},
             {"tenant": "acme", "session": "s1", "agent": "alice", "content": "also fine", "tags": ["x"]}]
    with pytest.raises(InvalidInputError) as caught:
        core.add_memories(items)  # type: ignore[arg-type]
    assert caught.value.fields["field"] == "tags"
    assert_nothing_written(core)


def test_every_known_field_is_taken_by_add_memory_and_create_handoff(core: MemoryCore) -> None:
    given: MemoryFields = {
        "role": "assistant", "channel": "ops", "source": {"id": "discord:1"}, "project_id": "p1", "salience": 0.7,
        "visibility": "tenant", "timestamp": "2026-01-02T03:04:05+00:00", "idempotency_key": "k1",
        "metadata": {"a": 1}, "entities": [{"name": "Kestrel"}], "relations": [], "provenance": "tool",
        "valid_from": "2026-01-01T00:00:00+00:00", "review_after": "2026-02-01T00:00:00+00:00",
    }
    assert set(given) == MEMORY_FIELD_NAMES  # a new field is given here too
    added = core.add_memory("acme", "s1", "alice", "a note", type="note", **given)
    handoff = core.create_handoff("acme", "s1", "alice", "next: ship", **{**given, "idempotency_key": "k2"})
    rows = {r.ref: r for r in core.get_contents("acme", [added.ref, handoff.ref]).found}
    assert rows[added.ref].type == "note" and rows[handoff.ref].type == "handoff"
    for row in rows.values():
        assert (row.role, row.channel, row.project_id, row.salience, row.metadata) == ("assistant", "ops", "p1",
                                                                                        0.7, {"a": 1})
        assert row.source == {"id": "discord:1"} and row.timestamp.isoformat() == "2026-01-02T03:04:05+00:00"
        assert row.valid_from is not None and row.valid_from.isoformat() == "2026-01-01T00:00:00+00:00"
        assert row.review_after is not None and row.review_due  # 2026-02-01 has passed
        assert row.provenance == "tool"


def test_an_export_line_rebuilds_every_field_of_an_add() -> None:
    exported = set(ExportLine.model_fields)
    assert exported >= ADD_ITEM_NAMES  # a new field is exported...
    assert exported - NOT_ADDED <= ADD_ITEM_NAMES  # ...and imported (entities, relations: as records of their own)
