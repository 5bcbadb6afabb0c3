"""The kept entity mention counts' scenario, shared by the SQLite and PostgreSQL graph stores:
memories that mention entities, then every write that moves a mention (merges, erased links,
deletes, restores, a rolled-back add), with the backend's own recount checked after each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from graph.api import EntitySpec
from tests.support.pg_graph import row

VIEWERS = (None, "ann", "bob", "cy")


def add_mentioning(store: Any, names: list[str], *, tenant: str = "acme", agent: str = "ann",
                   private: bool = False) -> int:
    """One memory that mentions ``names``, in its own write transaction."""
    with store.transaction() as tx:
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, f"memory {mem_id}", tenant=tenant, agent=agent,
                            visibility="agent" if private else "tenant"))
        tx.link_entities(tenant, mem_id, [EntitySpec(n) for n in names], [], 7)
        return int(mem_id)


def follow_the_writes(store: Any, agree: Callable[[str], None]) -> None:
    """Every kind of mention write, each followed by ``agree(tenant)`` (kept counts = a recount)."""
    m1 = add_mentioning(store, ["Alice", "Payments API"])
    add_mentioning(store, ["Alice"], agent="bob", private=True)
    m3 = add_mentioning(store, ["Alice", "Falcon"], agent="ann", private=True)
    add_mentioning(store, ["Payments-API", "Bob"], agent="cy")
    add_mentioning(store, ["Alice"], tenant="globex")  # another tenant's Alice is another entity with its own count
    again = add_mentioning(store, ["Alice", "Alice", "Falcon"])  # a repeated name is one mention
    agree("acme")
    agree("globex")
    found = store.entity_ids("acme", ["alice", "falcon"])
    alice, falcon = found["alice"], found["falcon"]
    theirs = store.entity_ids("globex", ["alice"])["alice"]
    for viewer in VIEWERS:  # another tenant's entity id counts nothing here, and is neither read nor listed
        assert store.entity_mention_counts("acme", [theirs], viewer, 10) == {theirs: 0}
        assert store.entity("acme", theirs, viewer) is None
        assert theirs not in {e.id for e in store.entities("acme", viewer)}
    assert [e.id for e in store.entities("globex", None)] == [theirs]
    assert store.entity_mention_counts("acme", [alice, falcon], None, 10) == {alice: 2, falcon: 1}
    assert store.entity_mention_counts("acme", [alice], "ann", 2) == {alice: 2}  # capped like the index count
    assert store.entity_mention_counts("acme", [alice], "ann", 0) == {alice: 0}

    with store.transaction() as tx:
        assert tx.merge_entities("acme", alice, falcon)  # m3 and `again` mentioned both: one mention left each
    agree("acme")
    with store.transaction() as tx:
        assert tx.erase_entity_links("acme", [(m1, alice)], []) == 1
    agree("acme")
    with store.transaction() as tx:
        assert tx.erase_memory("acme", m3) and tx.erase_memory("acme", again)
    agree("acme")
    with store.transaction() as tx:
        assert tx.restore_mentions("acme", m1, [alice]) == 1
        assert tx.restore_mentions("acme", m1, [alice]) == 0  # already there: counted once
    agree("acme")
    with pytest.raises(RuntimeError), store.transaction() as tx:  # a write that fails leaves no count behind
        mem_id = tx.allocate_ids(1)[0]
        tx.write_memory(row(mem_id, "x"))
        tx.link_entities("acme", mem_id, [EntitySpec("Zed"), EntitySpec("Alice")], [], 7)
        raise RuntimeError("the add fails after its mentions")
    agree("acme")
    assert "zed" not in store.entity_ids("acme", ["zed"])


def agree(store: Any, tenant: str, ids: list[int], visible: Callable[[int, str | None], int],
          stale: Callable[[], dict[str, list[str]]]) -> None:
    """Every read of the counts (the recall branch's, ``entity``, the listing, the names) equals
    ``visible`` (the count straight from the mention rows) for every viewer, and doctor finds
    nothing stale."""
    for viewer in VIEWERS:
        counts = store.entity_mention_counts(tenant, ids, viewer, 10_000)
        assert counts == {e: visible(e, viewer) for e in ids}, viewer
        for e in ids:
            node = store.entity(tenant, e, viewer)
            assert (node.mentions if node is not None else 0) == counts[e]
        listed = {e.id: e.mentions for e in store.entities(tenant, viewer)}
        assert listed == {e: n for e, n in counts.items() if n}, viewer
        assert set(store.entity_names(tenant, ids, viewer)) == {e for e, n in counts.items() if n}, viewer
    assert stale() == {}
