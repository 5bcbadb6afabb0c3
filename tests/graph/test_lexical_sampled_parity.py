"""PostgreSQL decides which common query words to drop as SQLite does: in a tenant of at least four
samples, from the word's share of the tenant's newest ``lexical.sample_rows`` rows, refreshed after a
tenth of a sample has changed (on any replica). The words kept are then counted exactly for their
idf, so their scores stay what exact counting gave. The sample (and the rare threshold) is shrunk
so that 400 rows make a big tenant: cap = max(10, 5 % of 400) = 20 rows."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from graph.api import GraphStore, RowFilter
from graph.pg import PostgresGraphStore
from graph.pg.lexical_sample import SampledCounts
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from testbed.postgres import fresh_database
from tests.support.pg_graph import row

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

ZIRCON = {100, 200, 300, 400}  # rare: 4 rows
TENMOKU = {i for i in range(1, 121) if i % 3 == 0}  # 40 old rows (10 %), none among the newest 50
GLINT = {i for i in range(351, 401) if i % 3 == 0}  # 17 rows (4 %), all among the newest 50 (34 % of them)
QUERY = ["zircon", "tenmoku", "glint"]


def _text(i: int) -> str:
    words = ["kiln", str(i)]
    words += ["zircon"] if i in ZIRCON else []
    words += ["tenmoku"] if i in TENMOKU else []
    words += ["glint"] if i in GLINT else []
    return " ".join(words)


def _write(store: GraphStore, ids: range, text: str | None = None) -> None:
    with store.transaction() as tx:
        tx.reserve_ids_through(5000)
        for i in ids:
            tx.write_memory(row(i, text or _text(i), tenant="big", session=f"s{i}", ts=1_000_000 + i))


def _tune(store: SqliteGraphStore | PostgresGraphStore, sample_rows: int = 50) -> None:
    store.lexical.min_rows = 10  # words in fewer rows are rare
    store.lexical.sample_rows = sample_rows  # 50: 400 rows are four samples, common words are estimated


@pytest.fixture
def dsn(postgres_dsn: str) -> str:
    return fresh_database(postgres_dsn)


@pytest.fixture
def stores(tmp_path: Path, dsn: str) -> Iterator[tuple[SqliteGraphStore, PostgresGraphStore]]:
    lite = SqliteGraphStore(GraphDB(tmp_path / "graph.sqlite3"))
    pg = PostgresGraphStore(dsn, owner="parity", retry_s=2.0)
    for store in (lite, pg):
        _write(store, range(1, 401))
        _tune(store)
    yield lite, pg
    lite.close()
    pg.close()


@pytest.mark.parametrize("own", [False, True])
def test_both_backends_drop_the_words_the_sample_calls_common_and_rank_the_same_rows(
        stores: tuple[SqliteGraphStore, PostgresGraphStore], own: bool) -> None:
    sampled = [[h.id for h in s.lexical_window(RowFilter("big"), QUERY, 50, own=own)] for s in stores]
    # glint (17 rows, under the cap) is a third of the sample: dropped; tenmoku (40, over it) is
    # absent from the sample: kept as a mid word
    assert sampled[0] == sampled[1]
    assert set(sampled[0]) == ZIRCON | TENMOKU
    assert sampled[0][:4] == sorted(ZIRCON)  # the rare word's rows first, on both
    # exact counting (the tenant under four samples) decides the other way round on both backends
    for s in stores:
        _tune(s, sample_rows=101)
    exact = [[h.id for h in s.lexical_window(RowFilter("big"), QUERY, 50, own=own)] for s in stores]
    assert exact[0] == exact[1] and set(exact[0]) == ZIRCON | GLINT


def test_a_mid_word_keeps_its_exact_count_in_the_idf(stores: tuple[SqliteGraphStore, PostgresGraphStore]) -> None:
    """A word kept on its estimate is scored with its exact row count, as exact counting scores it."""
    lite, pg = stores
    for store in stores:
        found = {h.id: h for h in store.lexical_window(RowFilter("big"), QUERY, 50)}
        store.lexical.min_rows = 2000  # a small tenant: the whole OR, every word counted exactly
        whole = {h.id: h for h in store.lexical_window(RowFilter("big"), ["zircon", "tenmoku"], 60)}
        store.lexical.min_rows = 10
        assert found.keys() == whole.keys() and all(h == whole[h.id] for h in found.values())
    assert lite.lexical_windows(RowFilter("big"), QUERY, 20)[0] == lite.lexical_window(RowFilter("big"), QUERY, 20)
    window, own = pg.lexical_windows(RowFilter("big"), QUERY, 20)
    assert window == pg.lexical_window(RowFilter("big"), QUERY, 20)
    assert own == pg.lexical_window(RowFilter("big"), QUERY, 20, own=True)


def test_the_estimate_is_the_share_of_the_newest_rows_scaled_to_the_tenant(
        stores: tuple[SqliteGraphStore, PostgresGraphStore]) -> None:
    pg = stores[1]
    counts = SampledCounts(50)

    def estimate(conn: psycopg.Connection[Any]) -> dict[str, int]:
        return counts.estimates(conn, "big", ["glint", "tenmoku", "kiln"], rows=400, min_rows=10, changes=0)

    # glint 17 of the newest 50 -> 136; tenmoku none -> min_rows; kiln in all, counted up to the stop (2 + 16)
    assert pg.read_with(estimate, "test") == {"glint": 136, "tenmoku": 10, "kiln": round(18 / 50 * 400)}


def test_an_estimate_is_reused_until_a_tenth_of_a_sample_has_changed_on_any_replica(
        stores: tuple[SqliteGraphStore, PostgresGraphStore], dsn: str) -> None:
    lite, pg = stores
    other = PostgresGraphStore(dsn, owner="parity-b", retry_s=2.0)
    try:
        _tune(other)

        def search(s: GraphStore) -> set[int]:
            return {h.id for h in s.lexical_window(RowFilter("big"), ["zircon", "tenmoku"], 60)}

        assert search(lite) == search(pg) == ZIRCON | TENMOKU  # tenmoku estimated at 10: a mid word
        # four new rows holding tenmoku, through the other replica on PostgreSQL: under a tenth of the
        # 50-row sample, so the estimates stay (tenmoku would now be 4 of the newest 50: 32 rows)
        _write(lite, range(401, 405), "kiln tenmoku")
        _write(other, range(401, 405), "kiln tenmoku")
        kept = ZIRCON | TENMOKU | set(range(401, 405))
        assert search(lite) == search(pg) == kept
        # a fifth: the sample is taken again, tenmoku is 5 of the newest 50 (-> 40 rows): dropped
        _write(lite, range(405, 406), "kiln tenmoku")
        _write(other, range(405, 406), "kiln tenmoku")
        assert search(lite) == search(pg) == ZIRCON
    finally:
        other.close()



def test_the_sample_walks_only_its_own_tenants_rows(stores: tuple[SqliteGraphStore, PostgresGraphStore],
                                                     dsn: str) -> None:
    """Taking the sample reads the tenant's newest rows from an index keyed (tenant, id), not the primary key
    backwards past every other tenant's newer rows (a tenant holding 1 % of the table walked 100 rows a row)."""
    pg = stores[1]
    with pg.transaction() as tx:  # a busier tenant, written after "big": its rows are the newest ids
        tx.reserve_ids_through(6000)
        for i in range(1001, 5001):  # "big" is a tenth of the table
            tx.write_memory(row(i, f"kiln {i}", tenant="busy", session=f"b{i % 50}", ts=2_000_000 + i))
    from graph.pg.lexical_sample import _SAMPLE
    with psycopg.connect(dsn) as conn:
        conn.execute("ANALYZE memories")
        conn.execute("SET enable_seqscan = off")  # a 4,400-row table: the plan the index gives at any size
        plan = conn.execute(b"EXPLAIN (ANALYZE, FORMAT JSON) " + _SAMPLE.encode(), ["big", 50]).fetchone()
    assert plan is not None
    nodes = [plan[0][0]["Plan"]]
    scans = []
    while nodes:
        node = nodes.pop()
        nodes += node.get("Plans", [])
        if "Index Name" in node:
            scans.append((node["Index Name"], node.get("Rows Removed by Filter", 0)))
    assert scans and all(removed == 0 for _name, removed in scans), scans
    assert pg.read_with(lambda c: SampledCounts(50)._sample(c, "big", 5, 0), "test") == (351, 50)
