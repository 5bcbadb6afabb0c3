"""The PostgreSQL graph store against a real server (testbed/postgres.py), method by method."""

from __future__ import annotations

import networkx as nx
import pytest

from graph.api import SUPERSEDES, EdgeRef, GraphStoreError, RowFilter, mem_node
from graph.pg import PostgresGraphStore
from tests.support.pg_graph import T, add, expected_windows, ids, row, windows

# ---- nodes and tenants -----------------------------------------------------------------------

def test_a_written_memory_reads_back_as_a_frozen_node_with_its_content(store: PostgresGraphStore) -> None:
    (mem_id,) = ids(store, 1)
    add(store, row(mem_id, "The kiln moved to Thursday", channel="ops", source_id="slack/1", key="k1"))
    node = store.memory(T, mem_id)
    assert node is not None and node.session == "s1" and node.channel == "ops" and node.source_id == "slack/1"
    assert dict(node.metadata) == {"b": 1, "a": [2]} and list(node.metadata) == ["b", "a"]
    with pytest.raises(TypeError):
        node.metadata["x"] = 1  # type: ignore[index]
    assert store.contents(T, [mem_id]) == {mem_id: "The kiln moved to Thursday"}
    assert store.by_idempotency_key(T, "k1") == node
    assert store.memories(T, [mem_id, 999_999]) == {mem_id: node}
    assert store.agents(T) == frozenset({"ann"}) and store.tenants() == [T]
    assert [m.name for m in store.agent_names(T).find("ask Ann about it")] == ["ann"]


def test_a_foreign_id_reads_as_missing_everywhere(store: PostgresGraphStore) -> None:
    mine, theirs = ids(store, 2)
    add(store, row(mine, "ours", key="k"), row(theirs, "theirs secret", tenant="other", key="k2",
                                             channel="c", source_id="x/1"))
    assert store.memory(T, theirs) is None and store.memories(T, [theirs]) == {}
    assert store.contents(T, [theirs]) == {} and store.by_idempotency_key(T, "k2") is None
    assert store.edges_of(T, mem_node(theirs)) == []
    assert store.adjacent_many(T, store.memories("other", [theirs]).values()) == {}
    assert store.lexical_window(RowFilter(T), ["secret"], 10) == []
    assert store.lexical_phrases(RowFilter(T), ["theirs secret"], 10) == []
    assert store.field_ids(T, "channel", "c", None) == [] and store.source_prefix_ids(T, "x/", None) == []
    assert list(store.neighbourhood(T, mem_node(theirs), 2, 100, 10).nodes) == []
    with store.transaction() as tx:
        assert tx.erase_memory(T, theirs) is False
    assert store.memory("other", theirs) is not None and store.count("other") == 1 and store.count(T) == 1


def test_an_idempotency_key_holds_across_two_replicas_on_one_database(store: PostgresGraphStore, dsn: str) -> None:
    with PostgresGraphStore(dsn, owner="replica-b") as other:
        first, second = ids(store, 1)[0], ids(other, 1)[0]
        assert first != second  # one sequence for every replica
        add(store, row(first, "hello", key="same"))
        with pytest.raises(GraphStoreError) as err:
            add(other, row(second, "hello again", key="same"))
        assert err.value.kind == "conflict"
        found = other.by_idempotency_key(T, "same")
        assert found is not None and found.id == first and other.count(T) == 1 and other.memory(T, second) is None


def test_reserved_ids_are_never_allocated_again(store: PostgresGraphStore) -> None:
    with store.transaction() as tx:
        tx.reserve_ids_through(500)
        assert tx.allocate_ids(2) == [501, 502]
        tx.reserve_ids_through(10)  # never moves back
        assert tx.allocate_ids(1) == [503]
        tx.journal([("add", T, "mem:503")])
        assert tx.id_in_use(503) and not tx.id_in_use(504)


def test_a_failed_transaction_leaves_nothing_and_no_counter_moved(store: PostgresGraphStore) -> None:
    (a,) = ids(store, 1)
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx.write_memory(row(a, "half"))
        tx.journal([("add", T, f"mem:{a}")])
        raise RuntimeError("boom")
    assert store.memory(T, a) is None and store.count(T) == 0 and store.version(T) == 0
    assert store.journal_size() == 0 and store.sessions(T) == []


# ---- order and counts ------------------------------------------------------------------------

def test_pages_adjacent_and_bounds_order_equal_timestamps_by_id(store: PostgresGraphStore) -> None:
    a, b, c, d = ids(store, 4)
    add(store, row(c, "c", ts=100), row(a, "a", ts=100), row(b, "b", ts=100, type_="note"), row(d, "d", ts=50))
    keys = [(100, c), (100, b), (100, a), (50, d)]
    assert store.page(T, "s1", None, 10) == keys
    assert store.page(T, "s1", (100, b), 10) == keys[2:] and store.page(T, None, None, 2) == keys[:2]
    assert store.page(T, "s1", None, 10, turns_only=True) == [(100, c), (100, a), (50, d)]
    assert list(store.iter_newest(T, "s1", (100, c))) == keys[1:]
    assert store.adjacent(T, "s1", (100, b), forward=True) == (100, c)
    assert store.adjacent(T, "s1", (100, b), forward=False) == (100, a)
    assert store.adjacent(T, "s1", (100, c), forward=False, turns_only=True) == (100, a)
    assert store.adjacent(T, "s1", (100, c), forward=True) is None
    nodes = store.memories(T, [a, c])
    assert store.adjacent_many(T, nodes.values()) == {a: ((50, d), (100, b)), c: ((100, b), None)}
    assert store.bounds(T, "s1") == ((50, d), (100, c)) and store.bounds(T, "nope") is None
    assert store.count(T) == 4 and store.count(T, "s1", turns_only=True) == 3 and store.non_turn_count(T) == 1


def test_counts_follow_writes_and_erases(store: PostgresGraphStore) -> None:
    a, b, c, d = ids(store, 4)
    v0 = store.version(T)
    add(store, row(a, "x", agent="ann", visibility="agent"), row(b, "y", agent="bob", visibility="agent"),
        row(c, "z", session="s2", type_="note"), row(d, "w", agent="bob", visibility="agent"))
    assert store.version(T) > v0
    assert store.hidden_count(T, "s1", "ann") == 2 and store.hidden_count(T, "s1", "bob") == 1
    assert store.hidden_count(T, "s1", None) == 3 and store.hidden_count(T, "s2", None) == 0
    stats = {s.session: (s.memories, s.turns) for s in store.sessions(T)}
    assert stats == {"s1": (3, 3), "s2": (1, 0)}
    v1 = store.version(T)
    with store.transaction() as tx:
        assert tx.erase_memory(T, b) and tx.erase_memory(T, c)
    assert store.version(T) > v1
    assert store.hidden_count(T, "s1", "ann") == 1 and store.count(T) == 2 and store.non_turn_count(T) == 0
    assert [s.session for s in store.sessions(T)] == ["s1"] and store.count(T, "s2") == 0


def test_field_ids_and_counts_are_newest_first(store: PostgresGraphStore) -> None:
    a, b, c = ids(store, 3)
    add(store, row(a, "1", type_="note", channel="ops"), row(b, "2", channel="ops", visibility="agent"),
        row(c, "3", type_="note", agent="bob"))
    assert store.field_ids(T, "type", "note", None) == [c, a] and store.field_ids(T, "type", "note", 1) == [c]
    assert store.field_count(T, "channel", "ops") == 2 and store.field_count(T, "agent", "bob") == 1
    assert store.sessions_in_channel(T, "ops") == {"s1"}
    assert store.session_has_channel(T, "s1", "ops") and not store.session_has_channel(T, "s1", "dev")
    with pytest.raises(ValueError):
        store.field_ids(T, "content", "x", None)


def test_only_shared_rows_put_a_session_in_a_channel(store: PostgresGraphStore) -> None:
    (a,) = ids(store, 1)
    add(store, row(a, "private", channel="ops", visibility="agent"))
    assert store.sessions_in_channel(T, "ops") == set() and not store.session_has_channel(T, "s1", "ops")


def test_a_source_prefix_with_percent_and_underscore_matches_them_literally(store: PostgresGraphStore) -> None:
    a, b, c, d = ids(store, 4)
    add(store, row(a, "1", source_id="u_1%/x"), row(b, "2", source_id="uX1%/y"), row(c, "3", source_id="u_1abc"),
        row(d, "4", source_id="u\\1"))
    assert store.source_prefix_ids(T, "u_1%", None) == [a] and store.source_prefix_count(T, "u_1%") == 1
    assert sorted(store.source_prefix_ids(T, "u_1", None)) == [a, c] and store.source_prefix_ids(T, "u\\", None) == [d]
    hits = store.lexical_window(RowFilter(T, source_prefix="u_1%"), ["1"], 10)
    assert [h.id for h in hits] == [a]


# ---- edges, episodes, meta ---------------------------------------------------------------------

def test_edges_superseders_episodes_and_the_neighbourhood(store: PostgresGraphStore) -> None:
    old, new, ep = ids(store, 3)
    add(store, row(old, "handoff one", type_="handoff"), row(new, "handoff two", type_="handoff"))
    episode = {"id": ep, "tenant": T, "session": "s1", "summary": "sum", "summary_source": "llm",
               "summary_error": None, "first_id": old, "last_id": new, "turn_count": 2, "last_ts_us": 5,
               "handoff_id": new, "created_us": 1, "updated_us": 2}
    with store.transaction() as tx:
        tx.write_edge(T, mem_node(new), mem_node(old), SUPERSEDES)
        tx.write_episode(episode)
        tx.write_episode({**episode, "summary": "sum 2", "updated_us": 3})
    assert store.superseders(T, [old, new]) == {old: [new]}
    assert EdgeRef("in", SUPERSEDES, mem_node(new)) in store.edges_of(T, mem_node(old))
    found = store.session_episode(T, "s1")
    assert found is not None and found.summary == "sum 2" and store.episodes(T) == [found]
    assert store.episode(T, ep) == found and store.episode("other", ep) is None
    g = store.neighbourhood(T, mem_node(new), 2, 100, hub_degree=10)
    assert {mem_node(old), mem_node(new), f"ep:{ep}", "session:acme/s1", "agent:acme/ann"} <= set(g.nodes)
    assert g.nodes[mem_node(old)]["content_len"] == len("handoff one") and g.has_edge(mem_node(new), mem_node(old))
    assert store.neighbourhood(T, mem_node(new), 2, 100, hub_degree=10) is g  # cached while nothing changed
    with pytest.raises(nx.NetworkXError):
        g.add_node("x")  # frozen: callers share it
    with store.transaction() as tx:
        tx.erase_edges([(mem_node(new), mem_node(old), SUPERSEDES)])
        tx.set_meta("k", "1", overwrite=False)
        tx.set_meta("k", "2", overwrite=False)
    assert store.superseders(T, [old]) == {} and store.meta("k") == "1" and store.meta("cursor_secret")
    again = store.neighbourhood(T, mem_node(new), 2, 100, hub_degree=10)  # the write moved the version
    assert again is not g and not again.has_edge(mem_node(new), mem_node(old))


def test_a_busy_session_shows_its_newest_children_whether_read_as_a_hub_or_by_its_edges(
        store: PostgresGraphStore) -> None:
    made = ids(store, 6)
    add(store, *(row(i, f"turn {i}", ts=1_000 + n) for n, i in enumerate(made)))
    for hub_degree in (3, 10):  # 6 memories: a hub at 3 (read through the session page), not at 10
        g = store.neighbourhood(T, "session:acme/s1", 1, 100, hub_degree=hub_degree, children=2)
        assert set(g.nodes) == {"session:acme/s1", mem_node(made[-1]), mem_node(made[-2])}
        assert g.graph["truncated"] and g.nodes["session:acme/s1"]["depth"] == 0
    walk = store.neighbourhood(T, mem_node(made[2]), 1, 100, hub_degree=10)
    assert walk.has_edge(mem_node(made[1]), mem_node(made[2]), key="NEXT")
    assert walk.has_edge(mem_node(made[2]), mem_node(made[3]), key="NEXT")
    assert store.neighbourhood("other", mem_node(made[2]), 1, 100, hub_degree=10).number_of_nodes() == 0


def test_duplicate_of_finds_the_newest_same_content_row_the_writer_can_read(store: PostgresGraphStore) -> None:
    a, b, c = ids(store, 3)
    add(store, row(a, "same", ts=1_000), row(b, "same", ts=2_000, agent="bob", visibility="agent"))
    with store.transaction() as tx:
        assert tx.duplicate_of(row(c, "same", ts=2_500), 5_000) == a
        assert tx.duplicate_of(row(c, "same", ts=2_500, agent="bob"), 5_000) == b
        assert tx.duplicate_of(row(c, "same", ts=9_000), 5_000) is None


# ---- lexical -----------------------------------------------------------------------------------

def test_the_window_lends_the_previous_shared_memory_and_ranks_own_text_apart(store: PostgresGraphStore) -> None:
    a, b, c, d = ids(store, 4)
    add(store, row(a, "Where did the kiln go?"), row(b, "Thursday, after the move"),
        row(c, "my private kiln notes", visibility="agent"), row(d, "sounds good"))
    hits = {h.id: h for h in store.lexical_window(RowFilter(T), ["kiln"], 10)}
    assert set(hits) == {a, b}  # c is private to ann: no viewer; d follows a private row
    assert hits[a].turn > 0 and hits[b].turn == 0 and hits[a].score > hits[b].score
    assert {h.id for h in store.lexical_window(RowFilter(T, viewer="ann"), ["kiln"], 10)} == {a, b, c}
    own = store.lexical_window(RowFilter(T), ["kiln"], 10, own=True)
    assert [h.id for h in own] == [a, b]
    assert [h.id for h in store.lexical_window(RowFilter(T), ["cafés", "moving"], 10)] == [b]  # stemmed


def test_out_of_order_inserts_and_deletes_repoint_the_next_window(store: PostgresGraphStore, dsn: str) -> None:
    a, b, c, d, e = ids(store, 5)
    add(store, row(a, "alpha", ts=10), row(c, "gamma", ts=30))
    add(store, row(b, "beta", ts=20))  # between a and c: c's window is now beta
    add(store, row(d, "delta", ts=5, visibility="agent"))  # before a, private: a lends from nothing
    add(store, row(e, "epsilon", ts=20))  # equal timestamp, larger id: after b
    assert windows(dsn) == expected_windows(store) == {d: "", a: "", b: "alpha", e: "beta", c: "epsilon"}
    hits = {h.id: h for h in store.lexical_window(RowFilter(T), ["epsilon"], 10)}
    assert set(hits) == {e, c} and hits[e].turn > 0 and hits[c].turn == 0
    with store.transaction() as tx:
        tx.erase_memory(T, e)
        tx.erase_memory(T, a)
    assert windows(dsn) == expected_windows(store) == {d: "", b: "", c: "beta"}
    assert [h.id for h in store.lexical_window(RowFilter(T), ["epsilon"], 10)] == []


def test_row_filters_are_applied_inside_the_lexical_query(store: PostgresGraphStore) -> None:
    a, b, c, d = ids(store, 4)
    add(store, row(a, "kiln one", type_="note", project_id="p1"), row(b, "kiln two", session="s2", agent="bob"),
        row(c, "kiln three", channel="ops", project_id="p2"), row(d, "kiln four", visibility="agent", agent="bob"))
    search = lambda **kw: sorted(h.id for h in store.lexical_window(RowFilter(T, **kw), ["kiln"], 10))  # noqa: E731
    assert search() == [a, b, c] and search(viewer="bob") == [a, b, c, d]
    assert search(type="note") == [a] and search(session="s2") == [b] and search(agent="bob") == [b]
    assert search(channel="ops") == [c] and search(project="") == [b] and search(project="p1") == [a, b]
    assert [h.id for h in store.lexical_window(RowFilter(T), ["kiln"], 2)] and len(
        store.lexical_window(RowFilter(T), ["kiln"], 2)) == 2


def test_a_big_tenant_scores_as_a_small_one_and_drops_only_words_in_most_rows(store: PostgresGraphStore) -> None:
    rows = [row(i, f"kiln {i} " + ("common " if i % 10 else "rare ") + ("moved" if i % 5 else "stayed"))
            for i in ids(store, 40)]
    add(store, *rows)
    f = RowFilter(T)
    small = store.lexical_window(f, ["rare", "stayed"], 10)
    store.lexical.min_rows = 30  # 40 rows are now a big tenant: probes first, cap = 30 windows
    big = store.lexical_window(f, ["rare", "stayed"], 10)
    assert [(h.id, round(h.score, 9), round(h.turn, 9)) for h in big] == [
        (h.id, round(h.score, 9), round(h.turn, 9)) for h in small] and big
    # "common" is in 36 of 40 rows (and in every window): dropped next to "rare", and alone
    assert {h.id for h in store.lexical_window(f, ["common", "rare"], 50)} == {
        h.id for h in store.lexical_window(f, ["rare"], 50)}
    assert store.lexical_window(f, ["common"], 50) == []
    store.lexical.min_rows = 2000  # a small tenant ranks it: every window holds it
    assert len(store.lexical_window(f, ["common"], 50)) == 40


def test_phrases_match_the_own_text_word_for_word(store: PostgresGraphStore) -> None:
    a, b, c = ids(store, 3)
    add(store, row(a, "ticket EXP-30 is open"), row(b, "exp and then 30"), row(c, "see exp 30 done"))
    assert sorted(h.id for h in store.lexical_phrases(RowFilter(T), ["exp 30"], 10)) == [a, c]
    assert [h.id for h in store.lexical_phrases(RowFilter(T), ["then 30", "nothing here"], 10)] == [b]
    assert store.lexical_phrases(RowFilter(T), ["30 see"], 10) == []  # c's window starts with b: not own text


@pytest.mark.slow
@pytest.mark.parametrize("attack", ["kiln & !x", "kiln:*", "kiln' | 'x", "'", "\\", "(kiln", "kiln <-> x",
                                    "kiln:A", "!!", "a''b", "kiln) | (x"])
def test_tsquery_syntax_in_user_text_is_just_words(store: PostgresGraphStore, attack: str) -> None:
    if not store.memory(T, 1):
        add(store, row(1, "the kiln it's hot"), row(2, "a x b"))
    window = store.lexical_window(RowFilter(T), [attack], 10)
    phrases = store.lexical_phrases(RowFilter(T), [attack], 10)
    assert {h.id for h in window} <= {1, 2} and {h.id for h in phrases} <= {1, 2}
    if "kiln" in attack:
        assert 1 in {h.id for h in window}


@pytest.mark.slow
def test_a_tenant_count_read_before_concurrent_adds_never_breaks_the_lexical_idf(store: PostgresGraphStore) -> None:
    """Under READ COMMITTED the tenant's row count and the words' row counts are read by separate
    statements: adds from another replica in between can make a word's count exceed the tenant's
    (every new row holds it). The IDF took log of a negative number: a replica's recall failed with
    INTERNAL_ERROR (``math domain error``) under the replica load test."""
    from graph.pg import lexical

    a, b, c = ids(store, 3)
    add(store, row(a, "kiln firing"), row(b, "kiln glaze"), row(c, "kiln shelf"))
    hits = store.read_with(lambda conn: lexical.window(conn, RowFilter(T), ["kiln"], 10, own=False, rows=1,
                                                        len_sum=6), "lexical search")  # 1 row counted, 3 hold it
    assert {h.id for h in hits} == {a, b, c}
