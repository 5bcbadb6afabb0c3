"""The PostgreSQL graph store answers every read of the seam, and every maintenance scan, exactly as
the SQLite one (the reference semantics), given the same writes: same values, same order."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import networkx as nx
import pytest

from graph.api import SUPERSEDES, EntitySpec, GraphStore, MemoryRecord, RelationSpec, RowFilter, mem_node
from graph.keys import DAY_US
from graph.maintenance_api import GraphMaintenance
from graph.pg import PostgresGraphStore
from graph.pg.maintenance import PgMaintenance
from graph.sqlite.db import GraphDB
from graph.sqlite.maintenance import SqliteMaintenance
from graph.sqlite.store import SqliteGraphStore
from testbed.postgres import fresh_database
from tests.support.pg_graph import row

DAY0 = 20_000  # a UTC day number


def _rows() -> list[MemoryRecord]:
    """Two tenants, three days, channels, private rows, source ids that sort apart from time."""
    out = []
    for i in range(1, 19):
        tenant = "acme" if i % 6 else "globex"
        out.append(row(i, f"note {i} about {'plums' if i % 2 else 'pears'}", tenant=tenant,
                       ts=(DAY0 + i % 3) * DAY_US + i * 1000, session=f"s{i % 2}", agent=("ann", "bob")[i % 3 == 0],
                       type_=("turn", "fact")[i % 4 == 0], visibility=("tenant", "agent")[i % 5 == 0],
                       channel=("ops" if i % 3 else None), source_id=f"doc/{(20 - i):02d}", key=f"k{i}"))
    return out


def _load(store: GraphStore) -> None:
    with store.transaction() as tx:
        tx.reserve_ids_through(100)
        for r in _rows():
            tx.write_memory(r)
        tx.write_edge("acme", mem_node(4), mem_node(2), SUPERSEDES)
        tx.write_episode({"id": 50, "tenant": "acme", "session": "s1", "summary": "sum", "summary_source": "llm",
                          "summary_error": None, "first_id": 1, "last_id": 17, "turn_count": 9, "last_ts_us": 9,
                          "handoff_id": None, "created_us": 1, "updated_us": 2})
    with store.transaction() as tx:  # 5: ann's private row, 15: bob's, 3 and 4: shared
        tx.link_entities("acme", 5, [EntitySpec("Kestrel", "project", ("ann-kestrel", "KS"))], [], 9)
        tx.link_entities("acme", 3, [EntitySpec("ks", None, ("Falco",)), EntitySpec("Hawk")],
                         [RelationSpec("Hawk", "Falco", "hunts")], 9)
        tx.link_entities("acme", 15, [EntitySpec("Hawk", None, ("bob-hawk",))], [], 9)
        tx.link_entities("acme", 4, [EntitySpec("Hawk"), EntitySpec("Wren")], [], 9)
    with store.transaction() as tx:
        tx.erase_memory("acme", 7)
        assert not tx.erase_memory("globex", 8)  # a foreign id is not erased
    with store.transaction() as tx:  # versions and locks: the guarded supersede, the state setter
        assert tx.supersede_memory("acme", 2, 4_000)
        assert not tx.supersede_memory("acme", 2, 5_000)  # already superseded
        assert tx.set_memory_state("acme", 3, {"locked": True})
        assert not tx.supersede_memory("acme", 3, 5_000)  # locked
        assert not tx.set_memory_state("globex", 3, {"locked": True})  # foreign: nothing written
        assert not tx.supersede_memory("globex", 4, 5_000)
        assert tx.set_memory_state("acme", 4, {"supersedes_id": 2})
        assert tx.set_memory_state("acme", 9, {"valid_to_us": 6_000, "locked": False})
        assert not tx.set_memory_state("acme", 7, {"locked": True})  # erased


@pytest.fixture
def stores(tmp_path: Path, postgres_dsn: str) -> Iterator[tuple[SqliteGraphStore, PostgresGraphStore]]:
    lite = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    pg = PostgresGraphStore(fresh_database(postgres_dsn), owner="parity", retry_s=2.0)
    _load(lite)
    _load(pg)
    yield lite, pg
    lite.close()
    pg.close()


def _reads(s: GraphStore, t: str) -> dict[str, Any]:
    ids = s.memory_ids(t)
    nodes = s.memories(t, range(0, 30))
    return {
        "memory_ids": ids, "memories": nodes, "memory": [s.memory(t, i) for i in range(0, 20)],
        "contents": s.contents(t, range(0, 30)), "by_key": s.by_idempotency_key(t, "k3"),
        "episodes": s.episodes(t), "episode": s.episode(t, 50), "session_episode": s.session_episode(t, "s1"),
        "page": s.page(t, "s1", None, 4), "page_before": s.page(t, None, (s.page(t, None, None, 3) or [(0, 0)])[-1], 5),
        "turn_page": s.page(t, None, None, 50, turns_only=True), "iter": list(s.iter_newest(t, "s0")),
        "adjacent": [s.adjacent(t, n.session, n.key, forward=f, turns_only=o)
                     for n in sorted(nodes.values(), key=lambda n: n.id) for f in (True, False)
                     for o in (True, False)],
        "adjacent_many": s.adjacent_many(t, nodes.values()), "bounds": [s.bounds(t, x) for x in (None, "s0", "zz")],
        "count": [s.count(t, x, turns_only=o) for x in (None, "s0", "s1", "zz") for o in (True, False)],
        "by_day": s.counts_by_day(t, DAY0 - 1, 5), "sessions": s.sessions(t),
        "hidden": [s.hidden_count(t, x, v) for x in ("s0", "s1") for v in (None, "ann", "bob")],
        "non_turn": s.non_turn_count(t),
        "field_ids": [s.field_ids(t, f, v, lim) for f, v in (("type", "turn"), ("agent", "ann"), ("channel", "ops"))
                      for lim in (None, 2)],
        "field_count": [s.field_count(t, f, v) for f, v in (("type", "fact"), ("agent", "bob"), ("channel", "ops"))],
        "field_counts": [s.field_counts(t, f) for f in ("type", "agent", "channel")],
        "private": s.private_count(t),
        "prefix": [s.source_prefix_ids(t, "doc/", lim) for lim in (None, 3)] + [s.source_prefix_ids(t, "doc/1", None)],
        "prefix_count": s.source_prefix_count(t, "doc/0"),
        "in_channel": s.sessions_in_channel(t, "ops"),
        "has_channel": [s.session_has_channel(t, x, "ops") for x in ("s0", "s1")],
        "edges_of": [sorted(s.edges_of(t, n), key=repr) for n in (mem_node(2), mem_node(4), mem_node(8),
                                                                   "agent:acme/ann", "session:acme/s1", "ep:50")],
        "superseders": s.superseders(t, range(0, 20)), "tenants": s.tenants(), "agents": s.agents(t),
        "agent_names": s.agent_names(t).names,
        **_entity_reads(s, t),
    }


def _entity_reads(s: GraphStore, t: str) -> dict[str, Any]:
    ids = [r.id for r in s.entity_records(t)]
    viewers = (None, "ann", "bob", "cat")
    return {
        "entities": [s.entities(t, v) for v in viewers], "records": s.entity_records(t),
        "some_records": s.entity_records(t, [*ids[:2], 999_999]),
        "entity": [s.entity(t, i, v) for i in ids for v in viewers],
        "by_name": [s.entity_by_name(t, n, v) for n in ("kestrel", "ANN-KESTREL", "falco", "bob-hawk", "x")
                    for v in viewers],
        "mentions": [s.entity_mentions(t, ids, v) for v in viewers], "memory_entities": s.memory_entities(t, range(20)),
        "relations": [s.entity_relations(t, ids, v) for v in viewers], "alias_views": s.alias_views(t),
        "all_mentions": s.all_mentions(t), "all_relations": s.all_relations(t),
    }


@pytest.mark.slow
@pytest.mark.parametrize("tenant", ["acme", "globex", "nobody"])
def test_every_read_of_the_seam_answers_as_sqlite_does(stores: tuple[SqliteGraphStore, PostgresGraphStore],
                                                       tenant: str) -> None:
    lite, pg = stores
    expected, found = _reads(lite, tenant), _reads(pg, tenant)
    assert {k: (v, expected[k]) for k, v in found.items() if v != expected[k]} == {}


@pytest.mark.slow
@pytest.mark.parametrize("tenant", ["acme", "nobody"])
def test_reads_inside_one_request_answer_as_sqlite_does_twice_over_and_after_a_write_in_it(
    stores: tuple[SqliteGraphStore, PostgresGraphStore], tenant: str
) -> None:
    """consistent_reads: the same answers inside the block (the second round from shared checks
    and the node cache on PostgreSQL), and the store's own write inside it is seen at once."""
    lite, pg = stores
    for s in (lite, pg):
        with s.consistent_reads(tenant):
            assert _reads(s, tenant) == _reads(lite, tenant)
            assert _reads(s, tenant) == _reads(lite, tenant)
    for s in (lite, pg):
        with s.consistent_reads(tenant):
            assert s.memory(tenant, 99) is None and s.bounds(tenant, "new") is None
            with s.transaction() as tx:
                tx.write_memory(row(99, "written inside the request", tenant=tenant, session="new", ts=7))
            found = s.memory(tenant, 99)
            assert found is not None and found.session == "new"
            assert s.contents(tenant, [99]) == {99: "written inside the request"}
            assert s.bounds(tenant, "new") == ((7, 99), (7, 99))


def _shape(g: nx.MultiDiGraph) -> tuple[Any, ...]:
    return (sorted(g.nodes(data="depth")), sorted(g.edges(keys=True)), g.graph["truncated"])


@pytest.mark.slow
@pytest.mark.parametrize(("root", "depth", "hub_degree", "children"), [
    (mem_node(4), 2, 100, 8), (mem_node(4), 3, 2, 3), ("session:acme/s1", 1, 3, 2), ("agent:acme/ann", 2, 100, 4),
    ("ep:50", 2, 100, 8), (mem_node(6), 2, 100, 8),
])
def test_neighbourhoods_hold_the_same_nodes_edges_and_depths(stores: tuple[SqliteGraphStore, PostgresGraphStore],
                                                             root: str, depth: int, hub_degree: int,
                                                             children: int) -> None:
    lite, pg = stores
    expected = lite.neighbourhood("acme", root, depth, 30, hub_degree, children)
    assert _shape(pg.neighbourhood("acme", root, depth, 30, hub_degree, children)) == _shape(expected)
    assert expected.number_of_nodes() > 1 or root == mem_node(6)  # mem:6 is globex's: an empty view


def _scans(m: GraphMaintenance) -> dict[str, Any]:
    tenants = m.tenants_present()
    return {
        "tenants": tenants, "rows": {t: m.memory_rows(t) for t in tenants},
        "some_rows": m.memory_rows("acme", [1, 6, 7, 9, 99]), "keys": m.idempotency_keys("acme", range(0, 20)),
        "existing": [m.existing_memory(r.node.tenant, r.node.session, r.node.content_hash, r.node.ts_us)
                     for r in _rows()],
        "in_use": [m.id_in_use(i) for i in (1, 7, 50, 99)], "episode_ids": m.episode_ids("acme"),
        "episodes": m.episodes("acme"), "stale": m.stale_counts(), "nodes": m.nodes(), "edges": m.edges(),
        "missing": m.missing_structure(), "dangling": m.dangling_edges(),
        "chars": m.content_chars(),
        "windows": [(w.present, w.extra, w.missing, w.differing, w.damaged) for w in map(m.window_state, tenants)],
        "lexical": [(s.index, s.indexed, s.differing) for s in map(m.lexical_state, tenants)],
    }


@pytest.mark.slow
def test_every_maintenance_scan_answers_as_sqlite_does(stores: tuple[SqliteGraphStore, PostgresGraphStore]) -> None:
    lite, pg = stores
    with lite.transaction() as tx:  # the same damage in both: a stray foreign edge, a lost node
        tx.write_edge("acme", mem_node(1), mem_node(6), SUPERSEDES)
    with pg.transaction() as tx:
        tx.write_edge("acme", mem_node(1), mem_node(6), SUPERSEDES)
    expected, found = _scans(SqliteMaintenance(lite.db)), _scans(PgMaintenance(pg))
    assert {k: (v, expected[k]) for k, v in found.items() if v != expected[k]} == {}
    assert expected["dangling"] and not expected["stale"]


def _lexical_rows() -> list[MemoryRecord]:
    """A big tenant once its prune threshold is 10 rows (cap 20 = 5% of 400): "zircon" in 4 rows
    (rare), "granite" and "basalt" in the same 16 (counted, under the cap; granite in row 300 too),
    "common" in 380 (over it);
    one session a row, so each window is its own text."""
    out = []
    for i in range(1, 401):
        words = ["zircon"] if i % 100 == 0 else ["granite", "basalt"] if i % 25 == 1 else []
        words += ["granite"] if i == 300 else []  # a rare row that holds a counted word too
        words += ["common"] if i % 20 else []
        out.append(row(i, f"kiln {i} " + " ".join(words), tenant="big", session=f"s{i}",
                       ts=(DAY0 * DAY_US) + i * 1000))
    return out


@pytest.fixture
def big_stores(tmp_path: Path, postgres_dsn: str) -> Iterator[tuple[SqliteGraphStore, PostgresGraphStore]]:
    lite = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    pg = PostgresGraphStore(fresh_database(postgres_dsn), owner="parity", retry_s=2.0)
    for store in (lite, pg):
        with store.transaction() as tx:
            tx.reserve_ids_through(1000)
            for r in _lexical_rows():
                tx.write_memory(r)
        store.lexical.min_rows = 10
    yield lite, pg
    lite.close()
    pg.close()


def _ids(store: GraphStore, terms: list[str], limit: int, own: bool = False) -> set[int]:
    return {h.id for h in store.lexical_window(RowFilter("big"), terms, limit, own=own)}


@pytest.mark.slow
@pytest.mark.parametrize("own", [False, True])
def test_in_a_big_tenant_rare_words_that_fill_the_pool_answer_alone_on_both_backends(
        big_stores: tuple[SqliteGraphStore, PostgresGraphStore], own: bool) -> None:
    zircon = {100, 200, 300, 400}
    for store in big_stores:
        # a row with both mid words outscores a zircon row (2 x IDF 3.2 > 4.5), yet the rare rows fill the pool
        assert _ids(store, ["zircon", "granite", "basalt"], 4, own) == zircon
        assert _ids(store, ["granite", "zircon", "common"], 4, own) == zircon
        found = store.lexical_window(RowFilter("big"), ["zircon", "granite", "basalt"], 4, own=own)
        store.lexical.min_rows = 2000  # a small tenant: every row scored over every word
        whole = {h.id: h for h in store.lexical_window(RowFilter("big"), ["zircon", "granite", "basalt"], 40, own=own)}
        store.lexical.min_rows = 10
        assert all(h == whole[h.id] for h in found)  # row 300 keeps granite's part of its score


@pytest.mark.slow
@pytest.mark.parametrize("own", [False, True])
def test_in_a_big_tenant_words_under_the_cap_still_rank_when_rare_words_leave_the_pool_short(
        big_stores: tuple[SqliteGraphStore, PostgresGraphStore], own: bool) -> None:
    granite = {i for i in range(1, 401) if i % 25 == 1}
    for store in big_stores:
        found = _ids(store, ["zircon", "granite", "basalt"], 30, own)
        assert found == {100, 200, 300, 400} | granite  # 4 rare rows are short of 30: granite joins
        assert _ids(store, ["zircon", "common"], 30, own) == {100, 200, 300, 400}  # over the cap: dropped


@pytest.mark.slow
@pytest.mark.parametrize("terms, limit", [(["zircon", "granite", "basalt"], 4), (["zircon", "granite", "basalt"], 30),
                                           (["granite", "basalt"], 8), (["zircon", "common"], 30), (["kiln"], 12)])
def test_both_rankings_from_one_search_are_the_two_searches_on_both_backends(
        big_stores: tuple[SqliteGraphStore, PostgresGraphStore], terms: list[str], limit: int) -> None:
    for store in big_stores:
        for prune in (10, 2000):  # the pruned big-tenant paths and the whole OR
            store.lexical.min_rows = prune
            for f in (RowFilter("big"), RowFilter("big", type="turn", viewer="ann")):  # filter in the SQL too
                window, own = store.lexical_windows(f, terms, limit)
                assert window == store.lexical_window(f, terms, limit)
                assert own == store.lexical_window(f, terms, limit, own=True)
        store.lexical.min_rows = 10


@pytest.fixture
def mid_stores(tmp_path: Path, postgres_dsn: str) -> Iterator[tuple[SqliteGraphStore, PostgresGraphStore]]:
    """800 rows, prune threshold 10 (cap 40): "granite basalt" in 16 rows, "granite" alone in 16 more:
    no rare word, both under the cap."""
    lite = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    pg = PostgresGraphStore(fresh_database(postgres_dsn), owner="parity", retry_s=2.0)
    for store in (lite, pg):
        with store.transaction() as tx:
            tx.reserve_ids_through(1000)
            for i in range(1, 801):
                words = "granite basalt" if i % 50 == 1 else "granite" if i % 50 == 2 else "filler"
                tx.write_memory(row(i, f"kiln {i} {words}", tenant="big", session=f"s{i}", ts=DAY0 * DAY_US + i))
        store.lexical.min_rows = 10
    yield lite, pg
    lite.close()
    pg.close()


@pytest.mark.slow
@pytest.mark.parametrize("own", [False, True])
def test_without_a_rare_word_rows_holding_two_words_then_the_newest_holding_one_are_scored_as_the_whole_or(
        mid_stores: tuple[SqliteGraphStore, PostgresGraphStore], own: bool) -> None:
    both = {i for i in range(1, 801) if i % 50 == 1}
    newest = sorted(both | {i for i in range(1, 801) if i % 50 == 2})[-20:]  # the newest 20 rows holding a word
    for store in mid_stores:
        found = store.lexical_window(RowFilter("big"), ["granite", "basalt"], 20, own=own)
        store.lexical.min_rows = 2000  # a small tenant: the whole OR, every row holding a word scored
        whole = {h.id: h for h in store.lexical_window(RowFilter("big"), ["granite", "basalt"], 40, own=own)}
        store.lexical.min_rows = 10
        assert both <= {h.id for h in found} and {h.id for h in found} - both <= set(newest)
        assert len(found) == 20 and all(h == whole[h.id] for h in found)
@pytest.mark.slow
def test_mention_counts_are_each_viewers_visible_mentions_capped_on_both_backends(
        stores: tuple[SqliteGraphStore, PostgresGraphStore]) -> None:
    answers = []
    for s in stores:
        ids = [e.id for e in s.entities("acme", "ann")] + [e.id for e in s.entities("acme", "bob")] + [999_999]
        found = {}
        for viewer in ("ann", "bob", "cat", None):
            for cap in (0, 1, 2, 100):
                counts = s.entity_mention_counts("acme", ids, viewer, cap)
                mentions = s.entity_mentions("acme", ids, viewer)
                assert counts == {e: min(cap, len(mentions.get(e, []))) for e in dict.fromkeys(ids)}
                found[(viewer, cap)] = sorted(counts.values())
        assert s.entity_mention_counts("other", ids, "ann", 100) == {e: 0 for e in dict.fromkeys(ids)}
        answers.append(found)
    assert answers[0] == answers[1]


@pytest.mark.slow
def test_both_backends_show_each_viewer_only_the_entity_names_it_may_read(
        stores: tuple[SqliteGraphStore, PostgresGraphStore]) -> None:
    for s in stores:
        seen = {v: {(e.name, e.aliases) for e in s.entities("acme", v)} for v in ("ann", "bob", "cat")}
        # bob's "ks" is his own entity: ann's private alias lent it nothing (issue 37, point 10)
        assert seen["cat"] == {("ks", ("ks", "Falco")), ("Hawk", ("Hawk",)), ("Wren", ("Wren",))}
        assert seen["ann"] == {("Kestrel", ("Kestrel", "ann-kestrel", "KS")), ("ks", ("ks", "Falco")),
                               ("Hawk", ("Hawk",)), ("Wren", ("Wren",))}
        assert seen["bob"] == {("ks", ("ks", "Falco")), ("Hawk", ("Hawk", "bob-hawk")), ("Wren", ("Wren",))}
        assert s.entity_by_name("acme", "ann-kestrel", "bob") is None
        kestrel = s.entity_by_name("acme", "KS", "ann")
        assert kestrel is not None and kestrel.name == "Kestrel"
