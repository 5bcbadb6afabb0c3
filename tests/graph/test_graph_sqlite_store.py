"""The SQLite graph store behind the seam: O(1) open, bounded caches, counts that match the rows.

The store keeps no resident graph: an open must not read a single memory row (checked with
SQLite's statement trace, not a clock), what it caches stays within ``cache_nodes``, and
the counts kept in the write transaction always equal a recount from the rows.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from graph.api import RowFilter
from graph.node_cache import LRU
from graph.sqlite.db import GraphDB
from graph.sqlite.migrations import COUNT_SCOPES_SQL, SCHEMA_VERSION
from graph.sqlite.store import SqliteGraphStore
from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import ConfigError
from memory_core.settings import load_settings
from tests.support.pg_graph import row
from tests.support.sqlite import sqlite_db

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def _open(data_dir: Path, **storage: Any) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "storage": storage})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every SQL statement the graph database runs, from its connection's trace callback."""
    statements: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr("graph.sqlite.db.sqlite3.connect", connect)
    yield statements


def _fill(core: MemoryCore, n: int, tenants: int = 3, start: int = 0) -> list[str]:
    """``n`` rows (from row ``start``: another call adds others, never an agent's repeat hygiene would skip)."""
    items = [{"tenant": f"t{i % tenants}", "session": f"s{i % 7}", "agent": f"a{i % 4}", "content": f"memory {i}",
              "type": "turn" if i % 3 else "note", "channel": "chat" if i % 5 == 0 else None,
              "visibility": "agent" if i % 11 == 0 else "tenant", "timestamp": T0 + timedelta(hours=i)}
             for i in range(start, start + n)]  # fmt: skip
    return [str(r.ref) for r in core.add_memories(items)]


def test_an_open_reads_no_memory_row(tmp_path: Path, traced: list[str]) -> None:
    core = _open(tmp_path / "data")
    _fill(core, 300)
    core.close()
    traced.clear()
    core = _open(tmp_path / "data")
    try:
        opened = [s for s in traced if "memories" in s.lower()]
        assert opened == [], f"the open read memory rows: {opened[:3]}"
        assert core._graph.count("t0") == 100  # and the store answers from its counts at once
    finally:
        core.close()


def test_the_node_cache_never_holds_more_than_its_configured_size(tmp_path: Path) -> None:
    core = _open(tmp_path / "data", graph_cache_nodes=50)
    try:
        refs = _fill(core, 400, tenants=1)
        ids = [int(r[4:]) for r in refs]
        for mem_id in ids:
            assert core._graph.memory("t0", mem_id) is not None
        assert isinstance(core._graph, SqliteGraphStore)
        assert len(core._graph.memory_rows.nodes) <= 50
        assert len(core._graph.memories("t0", ids)) == 400 and len(core._graph.memory_rows.nodes) <= 50
    finally:
        core.close()



def test_a_batch_lookup_of_the_node_cache_refreshes_what_it_finds_and_lists_what_it_misses() -> None:
    cache: LRU[int, str] = LRU(3)
    for k in (1, 2, 3):
        cache.put(k, f"n{k}")
    found, missing = cache.get_many([3, 9, 1, 9])
    assert found == {3: "n3", 1: "n1"} and missing == [9, 9]
    assert (cache.hits, cache.misses) == (2, 2)
    cache.put(4, "n4")  # 2 is now the least recently used: the batch lookup refreshed 3 and 1
    assert cache.get_many([1, 2, 3, 4]) == ({1: "n1", 3: "n3", 4: "n4"}, [2])

def _recount(db: GraphDB) -> set[tuple[str, str, str, int]]:
    with db.lock:
        return {(str(t), str(s), str(k), int(n)) for t, s, k, n in db.conn.execute(COUNT_SCOPES_SQL)}


def _kept(db: GraphDB) -> set[tuple[str, str, str, int]]:
    with db.lock:
        return {(str(t), str(s), str(k), int(n)) for t, s, k, n in
                db.conn.execute("SELECT tenant, scope, key, n FROM counts WHERE n != 0")}


@pytest.mark.slow
def test_counts_kept_by_writes_and_deletes_equal_a_recount_from_the_rows(tmp_path: Path) -> None:
    core = _open(tmp_path / "data")
    try:
        refs = _fill(core, 200)
        rng = random.Random(7)
        for ref in rng.sample(refs, 80):
            tenant = f"t{(int(ref[4:]) - 1) % 3}"
            assert core.delete_memory_as_operator(tenant, ref)
        _fill(core, 30)
        assert _kept(sqlite_db(core)) == _recount(sqlite_db(core))
    finally:
        core.close()


def test_a_schema_1_store_is_upgraded_with_its_counts_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    core = _open(tmp_path / "data")
    _fill(core, 60)
    with sqlite_db(core).transaction() as cur:  # what version 1 held: no counts, version 1
        cur.execute("DROP TABLE counts")
        cur.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    core.close()
    core = _open(tmp_path / "data")
    try:
        assert sqlite_db(core).meta("schema_version") == str(SCHEMA_VERSION)
        assert _kept(sqlite_db(core)) == _recount(sqlite_db(core)) and core._graph.count("t1") == 20
        with sqlite_db(core).transaction() as cur:
            cur.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    finally:
        core.close()
    with pytest.raises(ConfigError) as err:
        _open(tmp_path / "data")
    assert err.value.code == "CONFIG_INVALID" and "newer memory-core" in err.value.message


def test_pages_and_neighbours_follow_timestamp_then_id_with_equal_timestamps(tmp_path: Path) -> None:
    core = _open(tmp_path / "data")
    try:
        same = [core.add_memory("acme", "s", "a", f"tie {i}", timestamp=T0).ref for i in range(5)]
        later = core.add_memory("acme", "s", "a", "later", timestamp=T0 + timedelta(seconds=1)).ref
        ids = [int(r[4:]) for r in [*same, later]]
        t0_us = int(T0.timestamp() * 1_000_000)
        keys = core._graph.page("acme", "s", None, 3)
        assert [k[1] for k in keys] == [ids[5], ids[4], ids[3]]
        rest = core._graph.page("acme", "s", keys[-1], 10)
        assert [k[1] for k in rest] == [ids[2], ids[1], ids[0]]
        assert core._graph.adjacent("acme", "s", (t0_us, ids[2]), forward=True) == (t0_us, ids[3])
        assert core._graph.adjacent("acme", "s", (t0_us, ids[0]), forward=False) is None
        assert core._graph.adjacent("other", "s", (t0_us, ids[2]), forward=True) is None  # tenants never mix
        assert core._graph.memory("other", ids[0]) is None and core._graph.memories("other", ids) == {}
    finally:
        core.close()


def test_neighbours_read_in_one_statement_match_the_walk_of_each_session(tmp_path: Path) -> None:
    """``adjacent_many`` takes each node's session and timestamp from the node it is handed (no
    row read first): its keys must equal a walk of the session index row by row, with equal
    timestamps, rows written out of time order, two sessions and another tenant's rows between them."""
    core = _open(tmp_path / "data")
    try:
        rng = random.Random(7)
        offsets = [rng.choice([0, 0, 1, 2, 5]) for _ in range(40)]  # many ties, added in no order
        for i, off in enumerate(offsets):
            for tenant in ("acme", "other"):
                core.add_memory(tenant, f"s{i % 2}", "a", f"row {i}", timestamp=T0 + timedelta(seconds=off))
        g = core._graph
        nodes = g.memories("acme", [k[1] for k in g.iter_newest("acme", None)])
        foreign = g.memories("other", [k[1] for k in g.iter_newest("other", None)])
        assert len(nodes) == 40 and len(foreign) == 40
        walked = {n.id: (g.adjacent("acme", n.session, n.key, forward=False),
                         g.adjacent("acme", n.session, n.key, forward=True)) for n in nodes.values()}
        assert g.adjacent_many("acme", [*nodes.values(), *foreign.values()]) == walked
        assert sum(pair != (None, None) for pair in walked.values()) == 40
        assert g.adjacent_many("acme", foreign.values()) == {}  # another tenant's nodes are not looked up
    finally:
        core.close()



@pytest.mark.slow
def test_neighbours_of_more_nodes_than_one_statement_binds_come_back_whole_under_sqlites_oldest_limit(
        tmp_path: Path) -> None:
    """Three parameters a node: the chunks must stay under 999 variables, the bound of SQLite builds
    before 3.32 (set here on the connection itself), however many nodes are asked for."""
    core = _open(tmp_path / "data")
    try:
        for k in range(3):
            _fill(core, 700, tenants=1, start=700 * k)
        g = core._graph
        assert isinstance(g, SqliteGraphStore)
        with g.db.lock:
            g.db.conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 999)
        nodes = g.memories("t0", [k[1] for k in g.iter_newest("t0", None)])
        assert len(nodes) == 2_100
        walked = {n.id: (g.adjacent("t0", n.session, n.key, forward=False),
                         g.adjacent("t0", n.session, n.key, forward=True)) for n in nodes.values()}
        assert g.adjacent_many("t0", nodes.values()) == walked
    finally:
        core.close()

def test_doctor_finds_counts_that_disagree_with_the_rows_and_repair_recounts_them(tmp_path: Path) -> None:
    from memory_core.operator.doctor.run import check_stores, repair_stores

    core = _open(tmp_path / "data")
    try:
        _fill(core, 40)
        with sqlite_db(core).transaction() as cur:  # damage from outside: a session's count drifts
            cur.execute("UPDATE counts SET n = n + 5 WHERE tenant = 't1' AND scope = 'session' AND key = 's1'")
        core._graph.invalidate()
        found = [f for f in check_stores(core.operator_parts()).findings if f.kind == "graph_stale"]
        assert [(f.tenant, "session 's1'" in f.detail) for f in found] == [("t1", True)]
        assert repair_stores(core.operator_parts()).ok and check_stores(core.operator_parts()).ok
        assert _kept(sqlite_db(core)) == _recount(sqlite_db(core))
    finally:
        core.close()


def test_doctor_finds_a_drifted_entity_mention_count_and_repair_recounts_it(tmp_path: Path) -> None:
    from memory_core.operator.doctor.run import check_stores, repair_stores

    core = _open(tmp_path / "data")
    try:
        core.add_memory("acme", "s", "a", "Alice moved the ledger-svc deploy to Friday.")
        core.add_memory("acme", "s", "b", "Alice owns ledger-svc now.")
        with sqlite_db(core).transaction() as cur:  # damage from outside: an entity's count drifts
            assert cur.execute("UPDATE counts SET n = n + 3 WHERE tenant = 'acme' AND scope = 'mention'").rowcount
        core._graph.invalidate()
        found = [f for f in check_stores(core.operator_parts()).findings if f.kind == "graph_stale"]
        assert found and all("mention" in f.detail for f in found)
        assert repair_stores(core.operator_parts()).ok and check_stores(core.operator_parts()).ok
        assert _kept(sqlite_db(core)) == _recount(sqlite_db(core))
        alice = core._graph.entity_ids("acme", ["alice"])["alice"]
        assert core._graph.entity_mention_counts("acme", [alice], None, 100) == {alice: 2}
    finally:
        core.close()


def test_a_graph_read_that_fails_is_a_coded_store_error_on_every_public_read(tmp_path: Path) -> None:
    from memory_core.errors import StoreError

    core = _open(tmp_path / "data")
    ref = core.add_memory("acme", "s", "a", "the graph is about to fail").ref
    sqlite_db(core).close()  # every statement now raises inside the graph store
    try:
        for call in (lambda: core.query_recent_turns("acme", "s"), lambda: core.get_contents("acme", [ref]),
                     lambda: core.check_memory("acme", ref), lambda: core.recall("acme", "graph"),
                     lambda: core.recover_context("acme", "s")):
            with pytest.raises(StoreError) as err:
                call()
            assert err.value.code.startswith("STORE_")
    finally:
        core.close()


def test_word_counts_kept_for_lexical_search_are_forgotten_at_the_tenants_next_write(tmp_path: Path) -> None:
    """The store remembers each query word's probed count; a write that makes a rare word common
    must change the answer exactly as a store that never saw the first query answers."""
    store = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    store.lexical.min_rows = 10  # 400 rows: a big tenant, cap 20 rows
    with store.transaction() as tx:
        tx.reserve_ids_through(1000)
        for i in range(1, 401):  # zircon in 4 rows (rare), granite+basalt in the same 16 (common, under the cap)
            words = "zircon" if i % 100 == 0 else "granite basalt" if i % 25 == 1 else "filler"
            tx.write_memory(row(i, f"kiln {i} {words}", tenant="big", session=f"s{i}", ts=1_000_000 + i))
    terms = ["zircon", "granite", "basalt"]
    assert {h.id for h in store.lexical_window(RowFilter("big"), terms, 4)} == {100, 200, 300, 400}
    with store.transaction() as tx:  # zircon is now in 12 rows: common, and every word is ranked
        for i in range(401, 409):
            tx.write_memory(row(i, f"kiln {i} zircon", tenant="big", session=f"s{i}", ts=1_000_000 + i))
    fresh = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    fresh.lexical.min_rows = 10
    expected = fresh.lexical_window(RowFilter("big"), terms, 4)
    assert store.lexical_window(RowFilter("big"), terms, 4) == expected
    assert {h.id for h in expected} <= {i for i in range(1, 401) if i % 25 == 1}  # two mid words outrank zircon
    fresh.close()
    store.close()


def test_a_word_count_far_from_its_thresholds_is_reused_across_writes_and_recounted_near_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:  # searches run on the pool's readers
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: probes.append(sql) if "count(*)" in sql else None)
        return conn

    monkeypatch.setattr("graph.sqlite.readers.sqlite3.connect", connect)
    store = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    store.lexical.min_rows = 10  # 400 rows: a big tenant, cap 20 rows
    with store.transaction() as tx:
        tx.reserve_ids_through(1000)
        for i in range(1, 401):  # zircon in 2 rows (rare); filler in the rest (over the cap)
            tx.write_memory(row(i, f"kiln {i} " + ("zircon" if i % 200 == 0 else "filler"), tenant="big",
                                session=f"s{i}", ts=1_000_000 + i))
    probes.clear()
    search = lambda: {h.id for h in store.lexical_window(RowFilter("big"), ["zircon", "filler"], 10)}  # noqa: E731
    assert search() == {200, 400} and len(probes) == 3  # zircon and filler up to 10, filler up to the cap
    with store.transaction() as tx:  # one write: zircon's 2 rows can be 4 at most, filler's 390 still over 20
        tx.write_memory(row(401, "kiln 401 filler", tenant="big", session="s401", ts=1_000_401))
    assert search() == {200, 400} and len(probes) == 3
    with store.transaction() as tx:  # four more: zircon could now be 12, past the rare threshold
        for i in range(402, 406):
            tx.write_memory(row(i, f"kiln {i} zircon", tenant="big", session=f"s{i}", ts=1_000_000 + i))
    assert search() == {200, 400, 402, 403, 404, 405} and len(probes) == 4  # zircon counted again (6: rare)
    store.close()
