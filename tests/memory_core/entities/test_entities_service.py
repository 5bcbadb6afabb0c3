"""Entities through the service: declared on add (strictly validated, all-or-nothing), found in the
text by the extractor, listed per viewer, merged, and gone from a deleted memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from graph.api import GraphStoreError
from memory_core import MemoryCore
from memory_core.errors import InvalidInputError, NotFoundError
from tests.support.backends import open_core, store_backends


@pytest.fixture(params=store_backends("memory", "postgres"))
def core(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    c = open_core(str(request.param), tmp_path / "data", request)
    yield c
    c.close()


def _names(core: MemoryCore, tenant: str = "acme", viewer: str | None = None) -> dict[str, tuple[Any, ...]]:
    return {e.name: (e.kind, e.aliases, e.mentions) for e in core.list_entities(tenant, viewer=viewer)}


def test_declared_entities_and_relations_are_written_with_the_memory(core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s1", "ann", "the deploy is blocked", entities=[
        {"name": "Payments API", "kind": "service", "aliases": ["payments-api", "PAYMENTS API"]},
        {"name": "Alice", "kind": "person"}], relations=[{"from": "alice", "to": "payments-api", "label": "owns"}]).ref
    assert _names(core) == {"Payments API": ("service", ("Payments API", "payments-api"), 1),
                            "Alice": ("person", ("Alice",), 1)}
    api = core._graph.entity_by_name("acme", "payments api", None)
    alice = core._graph.entity_by_name("acme", "ALICE", None)
    assert api is not None and alice is not None
    assert [(r.src, r.dst, r.label, f"mem:{r.mem_id}") for r in core._graph.entity_relations("acme", [api.id], None)] \
        == [(alice.id, api.id, "owns", ref)]


def test_the_extractor_links_names_found_in_the_text_to_the_same_entities(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "note", entities=[{"name": "Payments API"}])
    core.add_memory("acme", "s1", "bob", "We asked Payments API for a refund.")
    assert _names(core)["Payments API"][2] == 2


@pytest.mark.parametrize(("entities", "relations", "field"), [
    ([{"name": ""}], None, "entities[0].name"),
    ([{"name": "x", "colour": "red"}], None, "entities[0]"),
    ([{"name": "x", "kind": "Not A Kind"}], None, "entities[0].kind"),
    ([{"name": "x", "aliases": "y"}], None, "entities[0].aliases"),
    ([{"name": "x" * 201}], None, "entities[0].name"),
    ([{"name": f"e{i}"} for i in range(33)], None, "entities"),
    ("Alice", None, "entities"),
    ([{"name": "Alice"}], [{"from": "Alice", "to": "Bob", "label": "knows"}], "relations[0].to"),
    ([{"name": "Alice"}], [{"from": "Alice", "to": "Alice"}], "relations[0].label"),
])
def test_malformed_entities_or_relations_are_refused_before_anything_is_written(
        core: MemoryCore, entities: Any, relations: Any, field: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        core.add_memory("acme", "s1", "ann", "hello", entities=entities, relations=relations)
    assert err.value.code == "INVALID_INPUT" and err.value.fields["field"] == field
    assert core._graph.count("acme") == 0 and core._graph.entity_records("acme") == []


def test_one_bad_item_in_a_batch_writes_none_of_it(core: MemoryCore) -> None:
    good = {"tenant": "acme", "session": "s1", "agent": "ann", "content": "a", "entities": [{"name": "Alice"}]}
    with pytest.raises(InvalidInputError):
        core.add_memories([good, {**good, "entities": [{"name": "Bob", "kind": 3}]}])
    assert core._graph.count("acme") == 0 and core._graph.entity_records("acme") == []


def test_a_failing_graph_write_leaves_no_entity_and_no_memory(core: MemoryCore,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    original = core._graph.transaction

    class Failing:
        def __init__(self, tx: Any) -> None:
            self.tx = tx

        def __getattr__(self, name: str) -> Any:
            return getattr(self.tx, name)

        def link_entities(self, *args: Any) -> list[int]:
            self.tx.link_entities(*args)
            raise GraphStoreError("io", "disk I/O error")

    from contextlib import contextmanager

    @contextmanager
    def failing() -> Iterator[Any]:
        with original() as tx:
            yield Failing(tx)

    monkeypatch.setattr(core._graph, "transaction", failing)
    with pytest.raises(Exception) as err:
        core.add_memory("acme", "s1", "ann", "hello", entities=[{"name": "Alice"}])
    assert getattr(err.value, "code", "").startswith("STORE")
    monkeypatch.undo()
    assert core._graph.count("acme") == 0 and core._graph.entity_records("acme") == []
    assert core._vectors.all_ids("acme") == set()


def test_a_private_memory_s_entities_are_listed_for_its_author_only(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "mine", visibility="agent", entities=[{"name": "Project Falcon"}])
    assert _names(core, viewer="bob") == {} and _names(core) == {}
    assert list(_names(core, viewer="ann")) == ["Project Falcon"]
    assert _names(core, "globex", viewer="ann") == {}


def test_merging_two_entities_moves_aliases_and_mentions_to_the_kept_one(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "a", entities=[{"name": "Payments", "kind": "service"}])
    core.add_memory("acme", "s1", "ann", "b", entities=[{"name": "payments-api", "aliases": ["pay"]}])
    merged = core.merge_entities("acme", "Payments", "PAY")
    assert merged.kept.aliases == ("Payments", "payments-api", "pay") and merged.merged_ref.startswith("ent:")
    assert _names(core) == {"Payments": ("service", ("Payments", "payments-api", "pay"), 2)}
    core.add_memory("acme", "s1", "ann", "c", entities=[{"name": "Payments-API"}])
    assert _names(core)["Payments"][2] == 3


@pytest.mark.slow
def test_a_merge_of_an_entity_with_itself_or_with_an_unknown_one_is_refused(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "ann", "a", entities=[{"name": "Payments", "aliases": ["pay"]}])
    with pytest.raises(InvalidInputError):
        core.merge_entities("acme", "payments", "PAY")
    with pytest.raises(NotFoundError):
        core.merge_entities("acme", "payments", "nothing")
    with pytest.raises(NotFoundError):
        core.merge_entities("globex", "payments", "pay")
    with pytest.raises(NotFoundError):
        core.merge_entities("acme", "payments", "ent:999999")


def test_deleting_a_memory_removes_its_mentions_and_the_unmentioned_entity_is_no_longer_listed(
        core: MemoryCore) -> None:
    ref = core.add_memory("acme", "s1", "ann", "a", entities=[{"name": "Alice"}, {"name": "Bob"}],
                          relations=[{"from": "Alice", "to": "Bob", "label": "pairs with"}]).ref
    core.add_memory("acme", "s1", "ann", "b", entities=[{"name": "Bob"}])
    assert core.delete_memory("acme", ref)
    assert _names(core) == {"Bob": (None, ("Bob",), 1)}
    assert core._graph.all_relations("acme") == []
    assert core.add_memory("acme", "s1", "ann", "c", entities=[{"name": "alice"}]).created
    assert _names(core)["Alice"][2] == 1


@pytest.mark.slow
def test_a_handoff_and_a_mixed_tenant_batch_link_their_declared_entities(core: MemoryCore) -> None:
    core.create_handoff("acme", "s1", "ann", "handing over", entities=[{"name": "Release 2.1", "kind": "release"}])
    core.add_memories([{"tenant": t, "session": "s1", "agent": "ann", "content": f"batch {t}",
                        "entities": [{"name": "Release 2.1"}]} for t in ("acme", "globex")])
    assert _names(core) == {"Release 2.1": ("release", ("Release 2.1",), 2)}
    assert _names(core, "globex") == {"Release 2.1": (None, ("Release 2.1",), 1)}
