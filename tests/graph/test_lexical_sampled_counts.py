"""In a big tenant, the lexical search decides which query words are too common to score by their
row counts. Counting such a word exactly up to the drop line (5 % of the tenant) cost 2.4-6.5 ms a
word at 1M memories, for every word a process had not counted yet; a tenant of at least four samples
now counts it among its newest rows and scales the share. These tests shrink the sample (and the
rare threshold) so that a few hundred rows make a big tenant."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from graph.api import RowFilter
from graph.sqlite.db import GraphDB
from graph.sqlite.store import SqliteGraphStore
from tests.support.pg_graph import row


def _store(path: Path, rows: list[tuple[int, str]]) -> SqliteGraphStore:
    store = SqliteGraphStore(GraphDB(path))
    store.lexical.min_rows = 10  # words in fewer rows are rare
    store.lexical.sample_rows = 50  # 400 rows: four samples, so common words are estimated
    with store.transaction() as tx:
        tx.reserve_ids_through(5000)
        for i, text in rows:
            tx.write_memory(row(i, text, tenant="big", session=f"s{i}", ts=1_000_000 + i))
    return store


def _traced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every count(*) statement the pool's readers (where searches run) execute."""
    probes: list[str] = []
    real_connect = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(lambda sql: probes.append(sql) if "count(*)" in sql else None)
        return conn

    monkeypatch.setattr("graph.sqlite.readers.sqlite3.connect", connect)
    return probes


def _text(i: int) -> str:
    words = ["kiln", str(i)]
    if i % 100 == 0:
        words.append("zircon")  # 4 rows: rare
    if i % 4 == 0:
        words.append("glaze")  # a quarter of every stretch of rows: common, dropped
    if i <= 120 and i % 3 == 0:
        words.append("tenmoku")  # 40 old rows (10 %), none among the newest: kept as a mid word
    if i % 25 == 1:
        words.append("granite")  # 16 rows (4 %), spread evenly: a mid word
    return " ".join(words)


def test_a_common_word_in_a_big_tenant_is_counted_among_its_newest_rows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = _traced(monkeypatch)
    store = _store(tmp_path / "graph.sqlite3", [(i, _text(i)) for i in range(1, 401)])
    try:
        hits = store.lexical_window(RowFilter("big"), ["zircon", "glaze"], 10)
        # glaze is in 25 % of the newest 50 rows: dropped, as an exact count (100 of 400) drops it
        assert {h.id for h in hits} == {100, 200, 300, 400}
        sampled = [p for p in probes if "rowid >= " in p]
        assert len(sampled) == 1 and "glaze" in sampled[0]  # glaze estimated; zircon counted (rare)
        # the sampled probe stops a little past 5 % of the sample, not at 5 % of the tenant
        assert sampled[0].rstrip().endswith("LIMIT 18)"), sampled[0]
        # tenmoku is in 10 % of the tenant but none of the newest rows: kept and scored as a mid word
        probes.clear()
        kept = {h.id for h in store.lexical_window(RowFilter("big"), ["zircon", "tenmoku"], 50)}
        assert {3, 6, 117, 120} <= kept and {100, 200, 300, 400} <= kept
    finally:
        store.close()


def test_a_sampled_count_is_reused_until_a_tenth_of_a_sample_has_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = _traced(monkeypatch)
    store = _store(tmp_path / "graph.sqlite3", [(i, _text(i)) for i in range(1, 401)])
    try:
        def search() -> set[int]:
            return {h.id for h in store.lexical_window(RowFilter("big"), ["zircon", "granite"], 30)}

        first = search()
        sampled = sum(1 for p in probes if "rowid >= " in p)
        assert sampled == 1 and {100, 200, 300, 400, 1, 26} <= first
        with store.transaction() as tx:  # four writes: under a tenth of the 50-row sample
            for i in range(401, 405):
                tx.write_memory(row(i, f"kiln {i}", tenant="big", session=f"s{i}", ts=1_000_000 + i))
        assert search() == first and sum(1 for p in probes if "rowid >= " in p) == sampled
        with store.transaction() as tx:  # a fifth: the sample is taken again and granite recounted in it
            tx.write_memory(row(405, "kiln 405 granite", tenant="big", session="s405", ts=1_000_405))
        assert 405 in search() and sum(1 for p in probes if "rowid >= " in p) == sampled + 1
    finally:
        store.close()


def test_a_tenant_under_four_samples_still_counts_its_common_words_exactly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    probes = _traced(monkeypatch)
    store = _store(tmp_path / "graph.sqlite3", [(i, _text(i)) for i in range(1, 401)])
    store.lexical.sample_rows = 101  # 400 rows are under four samples
    try:
        hits = store.lexical_window(RowFilter("big"), ["zircon", "tenmoku"], 10)
        assert not [p for p in probes if "rowid >= " in p]
        # tenmoku, 40 of 400 rows counted exactly, is over the 5 % line and dropped: only zircon's rows
        assert {h.id for h in hits} == {100, 200, 300, 400}
    finally:
        store.close()
