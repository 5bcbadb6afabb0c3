"""Shared pieces of the retrieval benchmarks: the two baselines and a hit/any/MRR scoreboard.

Baselines, on the same data and embedder as the method under test:
- raw vector: the query's embedding against the very Chroma collection recall uses;
- BM25: plain SQLite FTS5 (unicode61, no stemming, no stopwords), OR of the query's words.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

from memory_core import MemoryCore

WORD = re.compile(r"\w+", re.UNICODE)


class Bm25Baseline:
    """Plain FTS5 BM25 over a fixed list of texts; ranks return the texts' keys."""

    def __init__(self, keyed_texts: Sequence[tuple[str, str]]) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE docs USING fts5(content, tokenize='unicode61')")
        self._db.executemany("INSERT INTO docs(rowid, content) VALUES (?, ?)",
                             [(i, text) for i, (_key, text) in enumerate(keyed_texts)])
        self._keys = [key for key, _text in keyed_texts]

    def rank(self, query: str, depth: int) -> list[str]:
        words = dict.fromkeys(w.lower() for w in WORD.findall(query))
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = self._db.execute("SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                                (match, depth)).fetchall()
        return [self._keys[r[0]] for r in rows]


def vector_rank(core: MemoryCore, tenant: str, query: str, ref_to_key: dict[str, str], depth: int) -> list[str]:
    """Raw Chroma nearest neighbours of the query's embedding, as keys."""
    embedding = core._embedder.embed([query])[0]
    hits = core._vectors.query(tenant, embedding, depth)
    return [ref_to_key[h.id] for h in hits if h.id in ref_to_key]


@dataclass
class HitBoard:
    """hit@k of a target, any@k of any relevant key, MRR@depth of the target."""

    ks: tuple[int, ...] = (1, 5, 10)
    mrr_depth: int = 10
    rows: list[dict[str, float]] = field(default_factory=list)

    def add(self, ranked: Sequence[str], target: str, relevant: Sequence[str]) -> None:
        row: dict[str, float] = {}
        for k in self.ks:
            row[f"hit@{k}"] = 1.0 if target in ranked[:k] else 0.0
        row["any@5"] = 1.0 if set(relevant) & set(ranked[:5]) else 0.0
        rr = 0.0
        for rank, key in enumerate(ranked[: self.mrr_depth], start=1):
            if key == target:
                rr = 1.0 / rank
                break
        row[f"mrr@{self.mrr_depth}"] = rr
        self.rows.append(row)

    def summary(self) -> dict[str, float]:
        if not self.rows:
            return {}
        names = list(self.rows[0])
        out = {n: round(sum(r[n] for r in self.rows) / len(self.rows), 4) for n in names}
        out["n"] = float(len(self.rows))
        return out
