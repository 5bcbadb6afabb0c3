"""Facts in time (issue 49): validity windows, ending and reviving a fact, review_after, and as_of reads
(recall, recall_with_context, get_contents, check_memory, related), on both graph backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import InvalidInputError, LockedError, NotFoundError, SupersededError
from tests.memory_core.versions.test_versions import _pg_core
from tests.support.backends import open_core, store_backends

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(params=store_backends("memory", "postgres"))
def tcore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    backend = str(request.param)
    data = tmp_path / "data"
    c = _pg_core(request, data) if backend == "postgres" else open_core(backend, data, request)
    yield c
    c.close()


def _day(n: int) -> str:
    return (T0 + timedelta(days=n)).isoformat()


def _refs(core: MemoryCore, query: str, **options: object) -> list[str]:
    return [r.ref for r in core.recall("acme", query, **options).messages]  # type: ignore[arg-type]


def test_a_correction_ends_the_old_version_where_the_new_one_starts(tcore: MemoryCore) -> None:
    old = tcore.add_memory("acme", "s", "ann", "Staging runs in eu-west-1", type="fact")
    new = tcore.update_memory("acme", old.ref, content="Staging runs in eu-west-2")
    rows = tcore.history("acme", old.ref)
    assert rows[0].valid_to == new.added.timestamp == rows[1].timestamp
    assert rows[1].valid_to is None


def test_an_ended_fact_leaves_recall_keeps_its_history_and_revives(tcore: MemoryCore) -> None:
    ref = tcore.add_memory("acme", "s", "ann", "The payments-api freeze is on", type="fact").ref
    ended = tcore.end_memory("acme", ref, "the freeze was lifted", agent="bob")
    assert ended.changed and ended.valid_to is not None and ended.reason == "the freeze was lifted"
    assert ref not in _refs(tcore, "payments-api freeze")
    row = tcore.history("acme", ref)[0]
    assert row.ended == {"reason": "the freeze was lifted", "by": "bob"}
    assert row.to_dict()["ended"] == {"reason": "the freeze was lifted", "by": "bob"}
    assert "superseded" not in row.to_dict()
    assert not tcore.end_memory("acme", ref, "again").changed  # ended once
    with pytest.raises(SupersededError) as err:  # an ended fact is revived, not corrected
        tcore.update_memory("acme", ref, content="The payments-api freeze is back on")
    assert err.value.fields["ended"] is True
    assert tcore.revive_memory("acme", ref).changed
    assert ref in _refs(tcore, "payments-api freeze")
    assert tcore.history("acme", ref)[0].ended is None
    assert not tcore.revive_memory("acme", ref).changed


def test_end_refuses_a_corrected_version_a_locked_fact_and_an_empty_reason(tcore: MemoryCore) -> None:
    old = tcore.add_memory("acme", "s", "ann", "The release branch is rel-7", type="fact").ref
    tcore.update_memory("acme", old, content="The release branch is rel-8")
    with pytest.raises(SupersededError):
        tcore.end_memory("acme", old, "wrong")
    with pytest.raises(SupersededError):
        tcore.revive_memory("acme", old)
    locked = tcore.add_memory("acme", "s", "ann", "The on-call is Dana", type="fact").ref
    tcore.lock_memory("acme", locked)
    with pytest.raises(LockedError):
        tcore.end_memory("acme", locked, "rotated")
    with pytest.raises(InvalidInputError) as err:
        tcore.end_memory("acme", locked, "  ")
    assert err.value.fields["field"] == "reason"


def test_private_and_foreign_facts_cannot_be_ended_by_others(tcore: MemoryCore) -> None:
    private = tcore.add_memory("acme", "s", "ann", "My scratch: try eu-west-2", visibility="agent").ref
    with pytest.raises(NotFoundError):
        tcore.end_memory("acme", private, "no", agent="bob")
    with pytest.raises(NotFoundError):
        tcore.end_memory("other", private, "no")
    with pytest.raises(NotFoundError):
        tcore.revive_memory("other", private)
    assert tcore.end_memory("acme", private, "tried it", agent="ann").changed


def test_as_of_returns_the_version_valid_then(tcore: MemoryCore) -> None:
    old = tcore.add_memory("acme", "s", "ann", "The primary database is Postgres 13", type="fact",
                           timestamp=_day(0)).ref
    new = tcore.update_memory("acme", old, content="The primary database is Postgres 16").added.ref
    then, now = _day(1), datetime.now(UTC).isoformat()
    assert _refs(tcore, "primary database", as_of=then) == [old]
    assert _refs(tcore, "primary database", as_of=now) == [new]
    assert _refs(tcore, "primary database", as_of=_day(-1)) == []
    ctx = tcore.recall_with_context("acme", "primary database", [{"role": "user", "content": "which db?"}],
                                    as_of=then)
    assert [r.ref for r in ctx.messages] == [old]
    got = tcore.get_contents("acme", [new, old], as_of=then)
    assert [r.ref for r in got.found] == [old, old] and got.requested == [new, old]
    assert tcore.get_contents("acme", [new], as_of=_day(-1)).missing == [new]
    assert tcore.check_memory("acme", new, as_of=then).memory.ref == old
    with pytest.raises(NotFoundError):
        tcore.check_memory("acme", new, as_of=_day(-1))


def test_valid_from_backdates_a_fact_for_as_of(tcore: MemoryCore) -> None:
    ref = tcore.add_memory("acme", "s", "ann", "The outage runbook owner is Priya", type="fact",
                           valid_from=_day(0)).ref
    assert _refs(tcore, "outage runbook owner", as_of=_day(1)) == [ref]
    assert _refs(tcore, "outage runbook owner", as_of=_day(-1)) == []
    assert tcore.get_contents("acme", [ref]).found[0].to_dict()["valid_from"].startswith("2026-03-01")


def test_an_ended_fact_is_read_as_of_before_its_end(tcore: MemoryCore) -> None:
    ref = tcore.add_memory("acme", "s", "ann", "The canary fleet is cf-2", type="fact", timestamp=_day(0)).ref
    tcore.end_memory("acme", ref, "the canary fleet was retired")
    assert _refs(tcore, "canary fleet", as_of=_day(2)) == [ref]
    assert _refs(tcore, "canary fleet") == []


def test_a_malformed_instant_is_invalid_input_on_every_read(tcore: MemoryCore) -> None:
    ref = tcore.add_memory("acme", "s", "ann", "The build cache is warm", type="fact").ref
    calls = [
        lambda: tcore.recall("acme", "build cache", as_of="yesterday"),
        lambda: tcore.recall_with_context("acme", "build", [], as_of="2026-13-01T00:00:00Z"),
        lambda: tcore.get_contents("acme", [ref], as_of="2026-03-01"),  # no timezone
        lambda: tcore.check_memory("acme", ref, as_of=42),
        lambda: tcore.related("acme", ref, as_of="soon"),
        lambda: tcore.add_memory("acme", "s", "ann", "x", valid_from="then"),
        lambda: tcore.add_memory("acme", "s", "ann", "x", review_after="friday"),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError) as err:
            call()
        assert err.value.code == "INVALID_INPUT"
        assert err.value.fields["field"] in ("as_of", "valid_from", "review_after")


def test_review_after_marks_the_row_review_due_once_past(tcore: MemoryCore) -> None:
    past = tcore.add_memory("acme", "s", "ann", "The deploy freeze holds until Friday", type="fact",
                            review_after=_day(0)).ref
    future = tcore.add_memory("acme", "s", "ann", "The deploy window opens Monday", type="fact",
                              review_after=(datetime.now(UTC) + timedelta(days=30)).isoformat()).ref
    rows = {r.ref: r.to_dict() for r in tcore.recall("acme", "deploy freeze window").messages}
    assert rows[past]["review_due"] is True and "review_after" in rows[past]
    assert "review_due" not in rows[future] and "review_after" in rows[future]
    now_us = int(datetime.now(UTC).timestamp() * 1_000_000)
    assert [f"mem:{n.id}" for n in tcore._graph.review_due("acme", now_us, 10)] == [past]  # the inspector's list
    assert tcore._graph.review_due("other", now_us, 10) == []
    tcore.end_memory("acme", past, "checked: lifted")
    assert tcore._graph.review_due("acme", now_us, 10) == []


def test_as_of_reads_stay_inside_the_tenant_and_the_viewer(tcore: MemoryCore) -> None:
    mine = tcore.add_memory("acme", "s", "ann", "The vault path is ops/vault-a", type="fact",
                            timestamp=_day(0)).ref
    private = tcore.add_memory("acme", "s", "ann", "Ann's private vault note", type="fact", visibility="agent",
                               timestamp=_day(0)).ref
    then = _day(1)
    assert _refs(tcore, "vault", as_of=then) == [mine]
    assert private not in _refs(tcore, "vault", as_of=then, viewer="bob")
    assert private in _refs(tcore, "vault", as_of=then, viewer="ann")
    assert tcore.recall("other", "vault", as_of=then).messages == []
    assert tcore.get_contents("other", [mine, private], as_of=then).found == []
    assert tcore.get_contents("acme", [private], as_of=then, viewer="bob").found == []
    with pytest.raises(NotFoundError):
        tcore.check_memory("other", mine, as_of=then)
    with pytest.raises(NotFoundError):
        tcore.check_memory("acme", private, as_of=then, viewer="bob")
    with pytest.raises(NotFoundError):
        tcore.related("other", mine, as_of=then)
    with pytest.raises(NotFoundError):
        tcore.related("acme", private, as_of=then, viewer="bob")


def test_related_as_of_walks_the_memories_and_relations_valid_then(tcore: MemoryCore) -> None:
    old = tcore.add_memory("acme", "s", "ann", "Checkout depends on Redis", type="fact", timestamp=_day(0),
                           entities=[{"name": "Checkout"}, {"name": "Redis"}],
                           relations=[{"from": "Checkout", "to": "Redis", "label": "depends_on"}]).ref
    tcore.end_memory("acme", old, "moved to Valkey")
    now = tcore.related("acme", "Checkout")
    assert old not in [i.ref for i in now.items]
    assert not any(i.entity is not None and i.entity.name == "Redis" for i in now.items)  # nor its relation
    then = tcore.related("acme", "Checkout", as_of=_day(1))
    assert old in [i.ref for i in then.items]
    assert any(i.entity is not None and i.entity.name == "Redis" for i in then.items)


def test_a_step_8_sqlite_store_gains_the_validity_columns_and_keeps_its_rows(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    from tests.support.sqlite import sqlite_db

    core = open_core("memory", tmp_path / "data", request)
    try:
        ref = core.add_memory("acme", "s", "ann", "The staging cluster is blue", type="fact").ref
        db = sqlite_db(core)
        assert db is not None
        with db.transaction() as cur:  # what step 8 held
            for column in ("valid_from_us", "review_after_us", "end_reason", "ended_by"):
                cur.execute(f"ALTER TABLE memories DROP COLUMN {column}")
            cur.execute("UPDATE meta SET value = '8' WHERE key = 'schema_version'")
    finally:
        core.close()
    core = open_core("memory", tmp_path / "data", request)
    try:
        assert core.end_memory("acme", ref, "repainted green").changed
        assert core.history("acme", ref)[0].ended == {"reason": "repainted green", "by": None}
    finally:
        core.close()


def test_the_graph_guards_an_end_and_a_revive_in_its_update(tcore: MemoryCore) -> None:
    """What two replicas racing see: an end of a row another writer corrected or locked meanwhile, and a
    revive of a row not ended, write nothing (the service then answers SUPERSEDED)."""
    ref = tcore.add_memory("acme", "s", "ann", "The build runs on runner-a", type="fact").ref
    mem_id = int(ref[4:])
    graph = tcore._graph
    with graph.transaction() as tx:
        assert not tx.end_memory("acme", mem_id, None, None, None)  # not ended: nothing to revive
        assert not tx.end_memory("other", mem_id, 1, "x", None)  # another tenant's id
    with graph.transaction() as tx:
        assert tx.supersede_memory("acme", mem_id, 10**15)  # a correction by another writer
    with graph.transaction() as tx:
        assert not tx.end_memory("acme", mem_id, 10**15 + 1, "gone", "bob")
    node = graph.memory("acme", mem_id)
    assert node is not None and node.end_reason is None and node.valid_to_us == 10**15
    locked = int(tcore.add_memory("acme", "s", "ann", "The cache is warm", type="fact").ref[4:])
    tcore.lock_memory("acme", f"mem:{locked}")
    with graph.transaction() as tx:
        assert not tx.end_memory("acme", locked, 10**15, "cold", None)
