"""Corrections with history and locks (update_memory, lock_memory, unlock_memory, history), on
both graph backends: SQLite with embedded Chroma or the in-memory vectors, PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import InvalidInputError, LockedError, MemoryCoreError, NotFoundError, SupersededError
from memory_core.models import to_us
from tests.support.backends import open_core, store_backends
from tests.support.faults import FaultyVectorStore
from tests.support.sqlite import sqlite_db


@pytest.fixture(params=store_backends("memory", "persistent", "postgres"))
def vcore(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    backend = str(request.param)
    data = tmp_path / "data"
    c = _pg_core(request, data) if backend == "postgres" else open_core(backend, data, request)
    yield c
    c.close()


def _pg_core(request: pytest.FixtureRequest, data_dir: Path) -> MemoryCore:
    """PostgreSQL graph with in-memory vectors (the graph side is what versions change)."""
    from memory_core.embedding.local import HashEmbedder
    from memory_core.settings import load_settings
    from tests.support.backends import postgres_database as _postgres_database

    settings = load_settings(environ={}, overrides={
        "embedding": {"provider": "hash"},
        "storage": {"graph": "postgres", "postgres_dsn": _postgres_database(data_dir, request)}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)


def _id(ref: str) -> int:
    return int(ref.split(":", 1)[1])


def test_an_update_writes_a_new_version_that_supersedes_the_old_one_which_is_kept_with_its_end(
        vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "The deploy target is staging-3", type="fact",
                           metadata={"src": "standup"}, channel="ops", project_id="web")
    new = vcore.update_memory("acme", old.ref, content="The deploy target is staging-4")
    assert new.supersedes == old.ref and new.added.ref != old.ref and new.added.created
    kept = vcore._graph.memory("acme", _id(old.ref))
    head = vcore._graph.memory("acme", _id(new.added.ref))
    assert kept is not None and head is not None
    assert kept.valid_to_us == to_us(new.added.timestamp) and head.valid_to_us is None
    assert head.supersedes_id == kept.id and kept.supersedes_id is None
    # same session, author, type, channel, project and metadata; only the content changed
    assert (head.session, head.agent, head.type, head.channel, head.project_id, dict(head.metadata)) == \
           ("s1", "ann", "fact", "ops", "web", {"src": "standup"})
    assert {(e.kind, e.other) for e in vcore._graph.edges_of("acme", new.added.ref) if e.direction == "out"} >= \
           {("SUPERSEDES", old.ref)}
    got = vcore.get_contents("acme", [old.ref, new.added.ref]).found
    assert [r.content for r in got] == ["The deploy target is staging-3", "The deploy target is staging-4"]
    assert got[0].valid_to is not None and got[1].supersedes == old.ref
    assert vcore._graph.count("acme") == 2  # the old version is kept, not replaced


@pytest.mark.slow
def test_recall_returns_only_the_newest_version_and_says_which_one_it_supersedes(vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "Payments API timeout is 30 seconds", type="fact")
    mid = vcore.update_memory("acme", old.ref, content="Payments API timeout is 45 seconds")
    head = vcore.update_memory("acme", mid.added.ref, content="Payments API timeout is 60 seconds")
    for query in ("payments api timeout", ""):
        rows = vcore.recall("acme", query).messages
        assert [r.ref for r in rows] == [head.added.ref]
        assert rows[0].to_dict()["supersedes"] == mid.added.ref and "superseded" not in rows[0].to_dict()


def test_include_superseded_and_deep_also_return_the_old_versions_marked_with_their_end(vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "Payments API timeout is 30 seconds", type="fact")
    new = vcore.update_memory("acme", old.ref, content="Payments API timeout is 60 seconds")
    for flag in ("include_superseded", "deep"):
        found = vcore.recall("acme", "payments api timeout", include_superseded=flag == "include_superseded",
                             deep=flag == "deep").messages
        rows = {r.ref: r.to_dict() for r in found}
        assert set(rows) == {old.ref, new.added.ref}
        assert rows[old.ref]["superseded"] is True and rows[old.ref]["valid_to"] == new.added.to_dict()["timestamp"]
        assert "superseded" not in rows[new.added.ref]
    ranked = vcore.recall("acme", "payments api timeout", include_superseded=True).messages
    assert ranked[0].ref == new.added.ref  # the current version ranks first


def test_updating_a_superseded_version_is_refused_naming_the_head(vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "Standup is at 9", type="fact")
    mid = vcore.update_memory("acme", old.ref, content="Standup is at 10")
    head = vcore.update_memory("acme", mid.added.ref, content="Standup is at 11")
    with pytest.raises(SupersededError) as err:
        vcore.update_memory("acme", old.ref, content="Standup is at 8")
    assert err.value.code == "SUPERSEDED" and err.value.fields["head"] == head.added.ref
    assert vcore._graph.count("acme") == 3  # nothing written


def test_check_memory_and_history_show_the_whole_chain_oldest_first(vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "v1 of the plan", type="note")
    mid = vcore.update_memory("acme", old.ref, content="v2 of the plan")
    head = vcore.update_memory("acme", mid.added.ref, content="v3 of the plan", salience=0.9)
    chain = [old.ref, mid.added.ref, head.added.ref]
    for ref in chain:
        assert [r.ref for r in vcore.history("acme", ref)] == chain
        versions = vcore.check_memory("acme", ref).neighbours["versions"]
        assert [e["ref"] for e in versions] == chain
        assert ["valid_to" in e for e in versions] == [True, True, False]
    assert [r.salience for r in vcore.history("acme", old.ref)] == [0.5, 0.5, 0.9]
    single = vcore.add_memory("acme", "s1", "ann", "never corrected", type="note")
    assert "versions" not in vcore.check_memory("acme", single.ref).neighbours
    assert [r.ref for r in vcore.history("acme", single.ref)] == [single.ref]


def test_a_locked_memory_cannot_be_updated_or_deleted_until_it_is_unlocked(vcore: MemoryCore) -> None:
    m = vcore.add_memory("acme", "s1", "ann", "Never rotate the prod key by hand", type="decision")
    assert vcore.lock_memory("acme", m.ref) is True
    assert vcore.lock_memory("acme", m.ref) is False  # already locked: nothing changes
    assert vcore.get_contents("acme", [m.ref]).found[0].to_dict()["locked"] is True
    for attempt in (lambda: vcore.update_memory("acme", m.ref, content="x"),
                    lambda: vcore.delete_memory("acme", m.ref),
                    lambda: vcore.delete_memory_as_operator("acme", m.ref)):
        with pytest.raises(LockedError) as err:
            attempt()
        assert err.value.code == "LOCKED"
    assert vcore._graph.count("acme") == 1
    assert vcore.unlock_memory("acme", m.ref) is True and vcore.unlock_memory("acme", m.ref) is False
    new = vcore.update_memory("acme", m.ref, content="Rotate the prod key with the runbook")
    assert new.supersedes == m.ref and vcore.delete_memory("acme", new.added.ref)


def test_another_agents_private_memory_reads_as_missing_to_update_lock_and_history(vcore: MemoryCore) -> None:
    m = vcore.add_memory("acme", "s1", "ann", "my scratch idea", type="note", visibility="agent")
    for attempt in (lambda: vcore.update_memory("acme", m.ref, content="bob's edit", agent="bob"),
                    lambda: vcore.update_memory("acme", m.ref, content="nobody's edit"),
                    lambda: vcore.lock_memory("acme", m.ref, viewer="bob"),
                    lambda: vcore.unlock_memory("acme", m.ref),
                    lambda: vcore.history("acme", m.ref, viewer="bob")):
        with pytest.raises(NotFoundError):
            attempt()
    mine = vcore.update_memory("acme", m.ref, content="my better idea", agent="ann")
    head = vcore._graph.memory("acme", _id(mine.added.ref))
    assert head is not None and head.visibility == "agent" and head.agent == "ann"
    assert vcore.recall("acme", "idea", viewer="bob").messages == []
    assert [r.ref for r in vcore.recall("acme", "idea", viewer="ann").messages] == [mine.added.ref]
    # the operator (CLI) may act on any memory of the tenant
    assert vcore.set_lock_as_operator("acme", mine.added.ref, True)
    assert [r.ref for r in vcore.history_as_operator("acme", mine.added.ref)] == [m.ref, mine.added.ref]
    assert vcore.set_lock_as_operator("acme", mine.added.ref, False)
    assert vcore.update_memory_as_operator("acme", mine.added.ref, content="operator fix").supersedes == \
        mine.added.ref


def test_a_shared_memory_corrected_by_another_agent_is_authored_by_that_agent(vcore: MemoryCore) -> None:
    m = vcore.add_memory("acme", "s1", "ann", "the build uses node 18", type="fact")
    new = vcore.update_memory("acme", m.ref, content="the build uses node 20", agent="bob")
    head = vcore._graph.memory("acme", _id(new.added.ref))
    assert head is not None and head.agent == "bob" and head.session == "s1"


def test_a_ref_of_another_tenant_reads_as_missing(vcore: MemoryCore) -> None:
    m = vcore.add_memory("acme", "s1", "ann", "acme's fact", type="fact")
    for attempt in (lambda: vcore.update_memory("globex", m.ref, content="x"),
                    lambda: vcore.lock_memory("globex", m.ref), lambda: vcore.history("globex", m.ref)):
        with pytest.raises(NotFoundError):
            attempt()
    node = vcore._graph.memory("acme", _id(m.ref))
    assert node is not None and not node.locked and node.valid_to_us is None


def test_bad_updates_are_invalid_input_and_write_nothing(vcore: MemoryCore) -> None:
    m = vcore.add_memory("acme", "s1", "ann", "a note", type="note")
    h = vcore.create_handoff("acme", "s1", "ann", "done: a; next: b")
    ep = vcore.summarize_session("acme", "s1")
    for attempt in (lambda: vcore.update_memory("acme", m.ref),  # nothing to change
                    lambda: vcore.update_memory("acme", m.ref, content=""),
                    lambda: vcore.update_memory("acme", m.ref, salience=3.0),
                    lambda: vcore.update_memory("acme", m.ref, metadata="nope"),  # type: ignore[arg-type]
                    lambda: vcore.update_memory("acme", h.ref, content="a corrected handoff"),
                    lambda: vcore.update_memory("acme", str(ep.ref), content="x"),
                    lambda: vcore.update_memory("acme", "mem:zz", content="x"),
                    lambda: vcore.lock_memory("acme", str(ep.ref))):
        with pytest.raises(InvalidInputError):
            attempt()
    assert vcore._graph.count("acme") == 2


def test_the_handoff_chain_is_not_a_version_chain(vcore: MemoryCore) -> None:
    first = vcore.create_handoff("acme", "s1", "ann", "handoff one")
    second = vcore.create_handoff("acme", "s1", "ann", "handoff two")
    assert {r.ref for r in vcore.recall("acme", "handoff").messages} == {first.ref, second.ref}
    assert "versions" not in vcore.check_memory("acme", first.ref).neighbours
    assert [r.ref for r in vcore.history("acme", second.ref)] == [second.ref]


def test_versions_and_locks_survive_a_reopen(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    c = open_core("persistent", tmp_path / "data", request)
    old = c.add_memory("acme", "s1", "ann", "port is 8080", type="fact")
    new = c.update_memory("acme", old.ref, content="port is 8443")
    c.lock_memory("acme", new.added.ref)
    c.close()
    c = open_core("persistent", tmp_path / "data", request)
    try:
        assert [r.ref for r in c.recall("acme", "port").messages] == [new.added.ref]
        with pytest.raises(LockedError):
            c.update_memory("acme", new.added.ref, content="port is 9000")
        assert [r.ref for r in c.history("acme", old.ref)] == [old.ref, new.added.ref]
    finally:
        c.close()


def test_an_update_whose_vector_write_fails_leaves_the_old_version_current_and_nothing_else(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from memory_core.embedding.local import HashEmbedder
    from memory_core.errors import StoreUnavailableError
    from memory_core.settings import load_settings
    from memory_core.vectors.memory import InMemoryVectorStore

    faulty = FaultyVectorStore(InMemoryVectorStore())
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    c = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), vector_store=faulty)
    try:
        old = c.add_memory("acme", "s1", "ann", "retry budget is 3", type="fact")
        faulty.upsert_error = StoreUnavailableError("Chroma is down.")
        with pytest.raises(MemoryCoreError):
            c.update_memory("acme", old.ref, content="retry budget is 5")
        faulty.clear()
        node = c._graph.memory("acme", _id(old.ref))
        assert node is not None and node.valid_to_us is None and c._graph.count("acme") == 1
        assert faulty.all_ids("acme") == {old.ref} and c._graph.journal_size() == 0
        assert c.update_memory("acme", old.ref, content="retry budget is 5").supersedes == old.ref
    finally:
        c.close()


def _race_updates(cores: list[MemoryCore], ref: str) -> dict[str, str]:
    """Every core corrects ``ref`` at the same instant; each one's new ref, or its error code."""
    outcomes: dict[str, str] = {}
    start = threading.Barrier(len(cores))

    def correct(core: MemoryCore, name: str) -> None:
        start.wait()
        try:
            outcomes[name] = core.update_memory("acme", ref, content=f"the on-call is {name}").added.ref
        except SupersededError as exc:
            outcomes[name] = exc.code

    threads = [threading.Thread(target=correct, args=(core, f"r{i}")) for i, core in enumerate(cores)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes


def test_two_replicas_correcting_one_version_at_once_make_exactly_one_new_version(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    a = _pg_core(request, tmp_path / "a")
    dsn = (tmp_path / "a" / "postgres-dsn").read_text(encoding="utf-8")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "postgres-dsn").write_text(dsn, encoding="utf-8")
    b = _pg_core(request, tmp_path / "b")
    try:
        old = a.add_memory("acme", "s1", "ann", "the on-call is Dana", type="fact")
        for _round in range(5):
            head = a.recall("acme", "").messages[0].ref
            outcomes = _race_updates([a, b], head)
            assert sorted(v == "SUPERSEDED" for v in outcomes.values()) == [False, True], outcomes
        chain = a.history("acme", old.ref)
        assert len(chain) == 6 and a._graph.count("acme") == 6  # one new version per round, no orphan
        assert [r.valid_to is None for r in chain] == [False] * 5 + [True]
    finally:
        a.close()
        b.close()


def test_a_store_from_before_versions_opens_with_every_memory_current_and_unlocked(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    from graph.sqlite.migrations import SCHEMA_VERSION

    c = open_core("memory", tmp_path / "data", request)
    m = c.add_memory("acme", "s1", "ann", "an old fact", type="fact")
    assert sqlite_db(c) is not None
    with sqlite_db(c).transaction() as cur:  # what schema 2 held: no version columns
        for column in ("supersedes_id", "valid_to_us", "locked"):
            cur.execute(f"ALTER TABLE memories DROP COLUMN {column}")
        cur.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    c.close()
    c = open_core("memory", tmp_path / "data", request)
    try:
        assert sqlite_db(c) is not None and sqlite_db(c).meta("schema_version") == str(SCHEMA_VERSION)
        node = c._graph.memory("acme", _id(m.ref))
        assert node is not None and node.valid_to_us is None and not node.locked and node.supersedes_id is None
        assert c.update_memory("acme", m.ref, content="a new fact").supersedes == m.ref
    finally:
        c.close()


def test_a_postgresql_store_from_before_versions_is_upgraded_with_its_rows_current(dsn: str) -> None:
    import psycopg

    from graph.pg import PostgresGraphStore
    from graph.pg.migrations import migrate

    with psycopg.connect(dsn, autocommit=True) as conn:
        migrate(conn, through=3)
        conn.execute("INSERT INTO memories (id, tenant, session, agent, type, source, salience, visibility, ts_us, "
                     "metadata, content, content_len, content_hash) VALUES "
                     "(1, 'acme', 's', 'ann', 'fact', '{}', 0.5, 'tenant', 1, '{}', 'the kiln', 8, 'h')")
    with PostgresGraphStore(dsn, owner="a") as s:
        node = s.memory("acme", 1)
        assert node is not None and node.valid_to_us is None and not node.locked and node.supersedes_id is None
        with s.transaction() as tx:
            assert tx.supersede_memory("acme", 1, 5)
        assert (n := s.memory("acme", 1)) is not None and n.valid_to_us == 5


def test_a_session_summary_is_built_from_current_versions_only(vcore: MemoryCore) -> None:
    vcore.add_memory("acme", "s1", "ann", "we chose the blue logo", type="decision")
    old = vcore.add_memory("acme", "s1", "ann", "the launch date is March 3", type="fact")
    vcore.update_memory("acme", old.ref, content="the launch date is April 7")
    summary = vcore.summarize_session("acme", "s1").summary
    assert "April 7" in summary and "March 3" not in summary and "blue logo" in summary


def test_threads_of_one_process_correcting_one_version_at_once_make_exactly_one_new_version(
        vcore: MemoryCore) -> None:
    old = vcore.add_memory("acme", "s1", "ann", "the on-call is Dana", type="fact")
    outcomes = _race_updates([vcore] * 4, old.ref)
    assert sorted(v == "SUPERSEDED" for v in outcomes.values()) == [False, True, True, True], outcomes
    assert len(vcore.history("acme", old.ref)) == 2 and vcore._graph.count("acme") == 2
    assert vcore._graph.journal_size() == 0 and len(vcore._vectors.all_ids("acme")) == 2  # the losers left nothing


def test_doctor_restores_a_lost_old_version_superseded_and_linked_again(vcore: MemoryCore) -> None:
    from memory_core.operator.doctor.run import check_stores, repair_stores

    v1 = vcore.add_memory("acme", "s1", "ann", "the cache TTL is 60s", type="fact").ref
    v2 = vcore.update_memory("acme", v1, content="the cache TTL is 300s").added.ref
    assert check_stores(vcore.operator_parts()).ok
    with vcore._graph.transaction() as tx:  # damage: the old version's graph row is lost, its vector record stays
        tx.erase_memory("acme", _id(v1))
    vcore._graph.invalidate()
    assert [(f.kind, f.ref) for f in check_stores(vcore.operator_parts()).findings] == [("vector_orphan", v1)]
    report = repair_stores(vcore.operator_parts())
    assert report.ok and report.remaining == []
    assert {r.kind for r in report.repairs} >= {"vector_orphan", "version_open"}
    assert [r.ref for r in vcore.history("acme", v1)] == [v1, v2]
    assert [r.ref for r in vcore.recall("acme", "cache TTL").messages] == [v2]
    assert check_stores(vcore.operator_parts()).ok


def test_a_metadata_only_correction_is_not_reported_as_a_duplicate_of_what_it_corrects(vcore: MemoryCore) -> None:
    # issue 37, point 4: same content, same session, within the window, but a new version, not a repeat
    old = vcore.add_memory("acme", "s1", "ann", "The deploy target is staging-3", type="fact")
    meta = vcore.update_memory("acme", old.ref, metadata={"checked": True})
    assert meta.added.duplicate_of is None and meta.supersedes == old.ref
    salience = vcore.update_memory("acme", meta.added.ref, salience=0.9)
    assert salience.added.duplicate_of is None
    # back to v1's text after a change: still no repeat of its own history
    changed = vcore.update_memory("acme", salience.added.ref, content="The deploy target is staging-4")
    reverted = vcore.update_memory("acme", changed.added.ref, content="The deploy target is staging-3")
    assert reverted.added.duplicate_of is None


def test_a_correction_that_repeats_another_current_row_is_still_reported(vcore: MemoryCore) -> None:
    other = vcore.add_memory("acme", "s1", "ann", "The deploy target is staging-4", type="fact")
    old = vcore.add_memory("acme", "s1", "ann", "The deploy target is staging-3", type="fact")
    new = vcore.update_memory("acme", old.ref, content="The deploy target is staging-4")
    assert new.added.duplicate_of == other.ref
    # and a plain add repeating a current row still is one
    assert vcore.add_memory("acme", "s1", "ann", "The deploy target is staging-4").duplicate_of == new.added.ref
