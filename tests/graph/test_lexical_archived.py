"""Archived rows (retention, consolidation's merged members) are out of recall, so lexical search never
spends its pool on them: on both backends a current row is found however many archived rows of the same
words outrank it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.api import GraphStore, RowFilter
from graph.keys import DAY_US
from graph.pg import PostgresGraphStore
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from testbed.postgres import fresh_database
from tests.support.pg_graph import row

DAY0 = 20_000
ARCHIVED = range(1, 7)  # the kiln's fact six times over, archived (as a consolidation leaves its members)
CURRENT = 7  # the same fact, current (the canonical)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[GraphStore]:
    s: GraphStore
    if request.param == "sqlite":
        s = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    else:
        s = PostgresGraphStore(fresh_database(request.getfixturevalue("postgres_dsn")), owner="t", retry_s=2.0)
    with s.transaction() as tx:
        tx.reserve_ids_through(100)
        for i in (*ARCHIVED, CURRENT):  # the copies score higher: shorter texts of the same words
            text = "the kiln fires at dawn" if i in ARCHIVED else "the kiln fires at dawn, as every day this week"
            tx.write_memory(row(i, text, session="s1", ts=DAY0 * DAY_US + i * 1000))
        tx.write_memory(row(8, "a kiln elsewhere", session="s2", ts=DAY0 * DAY_US + 8000))
    with s.transaction() as tx:
        for i in ARCHIVED:
            assert tx.set_memory_state("acme", i, {"archived_us": DAY0 * DAY_US + 9000})
    yield s
    s.close()


@pytest.mark.parametrize("filters", [RowFilter("acme"), RowFilter("acme", session="s1")])
def test_archived_rows_never_take_a_place_in_the_lexical_pool(store: GraphStore, filters: RowFilter) -> None:
    for own in (False, True):
        found = [h.id for h in store.lexical_window(filters, ["kiln", "dawn"], 2, own=own)]
        assert found[0] == CURRENT and not set(found) & set(ARCHIVED)
    window, own_hits = store.lexical_windows(filters, ["kiln", "dawn"], 2)
    assert {h.id for h in window} & set(ARCHIVED) == set() == {h.id for h in own_hits} & set(ARCHIVED)
    assert CURRENT in {h.id for h in window} and CURRENT in {h.id for h in own_hits}
    assert [h.id for h in store.lexical_phrases(filters, ["kiln fires"], 2)] == [CURRENT]


def test_a_restored_row_is_found_again(store: GraphStore) -> None:
    with store.transaction() as tx:
        assert tx.set_memory_state("acme", 1, {"archived_us": None})
    assert 1 in {h.id for h in store.lexical_window(RowFilter("acme"), ["kiln", "dawn"], 2)}
