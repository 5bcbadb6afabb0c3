"""LoCoMo evidence recall through ``MemoryCore.recall``, next to two baselines.

    python -m bench.quality.locomo --data ../shared/data/locomo_dev.json [--json PATH] [--preset NAME]

Any LoCoMo-format file, read by path (never copied into the repo). One memory per turn is
ingested through ``core.add_memories`` into a temporary data dir (tenant = sample_id,
session = session_N, timestamp = the session's date, agent = speaker, content =
"speaker: text" + image caption, ``source.id`` = dia_id). Every QA item of categories 1-4
is recalled inside its own tenant and scored as ``../shared/data/README.md`` defines
(any@k, all@k, frac@k for k = 5, 10 and MRR@20; micro and per category).

Category 5 (adversarial: the question names the wrong speaker) is scored the same way in a column of
its own, never in the micro average: is the turn the question misattributes found although it was
said by the other speaker? ``--no-adversarial`` leaves it out. A last table gives any@5, any@10 and
MRR@20 per category for each conversation, each method beside the others, and marks (``<``) where
recall falls below one of its parts.

Embeddings are cached outside the repository (``bench.latency.embed_cache``; ``~/.cache/memory-core-bench``),
so only the first run pays for MiniLM.

In the same run, on the same data and embedder:
- ``vector``: the question's embedding against the very Chroma collection recall uses
  (``core._vectors.query``), nearest first;
- ``bm25``: plain SQLite FTS5 (unicode61) over the turns, OR of every word of the question.
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, percentiles, postgres_database, print_table, stage
from bench.data.locomo import ADVERSARIAL, CATEGORY_NAMES, SCORED_CATEGORIES, Conversation, QAItem, load_locomo
from bench.latency.embed_cache import cached_embedder
from bench.quality.metrics import MRR_DEPTH, Scoreboard
from memory_core import MemoryCore

DEPTH = max(20, MRR_DEPTH)  # rows asked of every method; MRR@20 needs 20
WORD = re.compile(r"\w+", re.UNICODE)
Ranker = Callable[[QAItem], list[str]]  # question -> ranked source ids


def ingest(core: MemoryCore, conv: Conversation) -> dict[str, str]:
    """Add every turn through the public API; returns ref -> dia_id."""
    items = [
        {
            "tenant": t.tenant,
            "session": t.session,
            "agent": t.agent,
            "content": t.content,
            "timestamp": t.timestamp,
            "source": {"id": t.source_id},
            "type": "turn",
        }
        for t in conv.turns
    ]
    results = core.add_memories(items)
    # a turn write-time hygiene left out (none of LoCoMo's: each holds its speaker's words) maps no ref
    return {r.ref: t.source_id for r, t in zip(results, conv.turns, strict=True) if r.stored and r.ref}


def recall_ranker(core: MemoryCore, ref_to_sid: dict[str, str], **options: Any) -> Ranker:
    """The method under test: ``core.recall`` with its defaults (or a preset)."""

    def rank(qa: QAItem) -> list[str]:
        result = core.recall(qa.tenant, qa.question, limit=DEPTH, **options)
        return [ref_to_sid.get(m.ref) or str(m.source.get("id", "")) for m in result.messages]

    return rank


def vector_ranker(core: MemoryCore, ref_to_sid: dict[str, str]) -> Ranker:
    """Baseline: raw Chroma nearest neighbours of the question's embedding."""

    def rank(qa: QAItem) -> list[str]:
        embedding = core._embedder.embed([qa.question])[0]
        hits = core._vectors.query(qa.tenant, embedding, DEPTH)
        return [ref_to_sid[h.id] for h in hits if h.id in ref_to_sid]

    return rank


def bm25_ranker(conv: Conversation) -> Ranker:
    """Baseline: plain BM25 (FTS5 unicode61, no stemming, no stopwords), OR of the question's words."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE turns USING fts5(content, tokenize='unicode61')")
    rows = [(i, t.content) for i, t in enumerate(conv.turns)]
    db.executemany("INSERT INTO turns(rowid, content) VALUES (?, ?)", rows)
    sids = [t.source_id for t in conv.turns]

    def rank(qa: QAItem) -> list[str]:
        words = dict.fromkeys(w.lower() for w in WORD.findall(qa.question))
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)
        rows = db.execute(
            "SELECT rowid FROM turns WHERE turns MATCH ? ORDER BY bm25(turns) LIMIT ?", (match, DEPTH)
        ).fetchall()
        return [sids[r[0]] for r in rows]

    return rank


def score(boards: dict[str, Scoreboard], times: dict[str, list[float]], name: str, rank: Ranker,
          items: Sequence[QAItem], conv: Scoreboard) -> None:
    """Rank every item with ``rank`` into the method's board and its conversation's (``conv``); time the
    scored categories' calls."""
    board = boards.setdefault(name, Scoreboard())
    spent = times.setdefault(name, [])
    for qa in items:
        start = time.perf_counter()
        ranked = rank(qa)
        if qa.category in SCORED_CATEGORIES:
            spent.append(time.perf_counter() - start)
        board.add(qa.category, ranked, qa.evidence)
        conv.add(qa.category, ranked, qa.evidence)


def run(data: Path, preset: str | None, baselines: bool, postgres_dsn: str | None = None,
        embedder: str = "minilm", adversarial: bool = True) -> dict[str, Any]:
    conversations = load_locomo(data)
    boards: dict[str, Scoreboard] = {}
    per_conv: dict[str, dict[str, Scoreboard]] = {}
    times: dict[str, list[float]] = {}
    options = {"preset": preset} if preset else {}
    label = f"recall[{preset}]" if preset else "recall"
    with tempfile.TemporaryDirectory(prefix="locomo-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(embedder), postgres_dsn)
        try:
            for conv in conversations:
                items = [*conv.qa, *(conv.adversarial if adversarial else ())]
                mine = per_conv.setdefault(conv.sample_id, {})
                with stage(f"{conv.sample_id}: ingest {len(conv.turns)} turns, score {len(items)} questions"):
                    ref_to_sid = ingest(core, conv)
                    rankers: list[tuple[str, Ranker]] = [(label, recall_ranker(core, ref_to_sid, **options))]
                    if baselines:
                        rankers += [("vector (raw Chroma)", vector_ranker(core, ref_to_sid)),
                                    ("bm25 (plain FTS5)", bm25_ranker(conv))]
                    for name, ranker in rankers:
                        score(boards, times, name, ranker, items, mine.setdefault(name, Scoreboard()))
        finally:
            core.close()
    return {
        "data": str(data),
        "graph": "postgres" if postgres_dsn else "sqlite",
        "conversations": [c.sample_id for c in conversations],
        "questions": sum(len(c.qa) for c in conversations),
        "adversarial": sum(len(c.adversarial) for c in conversations) if adversarial else 0,
        "depth": DEPTH,
        "methods": {name: board.summary() for name, board in boards.items()},
        "per_conversation": {cid: {name: b.summary() for name, b in mine.items()} for cid, mine in per_conv.items()},
        "latency": {name: percentiles(spent) for name, spent in times.items() if spent},
    }


def report(result: dict[str, Any]) -> None:
    methods: dict[str, dict[str, dict[str, float]]] = result["methods"]
    names = next(iter(methods.values()))["micro"]
    metrics = [m for m in names if m != "n"]
    rows = [
        [name, *(f"{s['micro'][m]:.3f}" for m in metrics), f"{result['latency'][name]['p50_ms']:.1f}"]
        for name, s in methods.items()
    ]
    print_table(f"LoCoMo evidence recall — {result['questions']} questions, micro", ["method", *metrics, "p50 ms"],
                rows)
    for name, s in methods.items():
        cats = sorted(k for k in s if k.startswith("cat"))
        cat_rows = [
            [f"{k} {CATEGORY_NAMES.get(int(k[3:]), '')}", int(s[k]["n"]), *(f"{s[k][m]:.3f}" for m in metrics)]
            for k in cats
        ]
        print_table(f"{name} — per category (cat5 apart: not in the micro average)", ["category", "n", *metrics],
                    cat_rows)
    by_category(result)


CATEGORY_COLUMNS = (*(f"cat{c}" for c in SCORED_CATEGORIES), "micro", f"cat{ADVERSARIAL}")


def by_category(result: dict[str, Any]) -> None:
    """any@5, any@10 and MRR@20 per category, per conversation and over all of them, every method beside the
    others; ``<`` marks a recall figure below one of its parts (a baseline) on the same questions."""
    methods: dict[str, dict[str, dict[str, float]]] = result["methods"]
    names = list(methods)
    scopes = [(cid, result["per_conversation"][cid]) for cid in result["conversations"]] + [("all", methods)]
    headers = [c if c == "micro" else CATEGORY_NAMES[int(c[3:])] for c in CATEGORY_COLUMNS]
    headers = ["1-4" if h == "micro" else h for h in headers]
    for metric in ("any@5", "any@10", f"mrr@{MRR_DEPTH}"):
        rows = []
        for scope, by_method in scopes:
            for name in names:
                cells = []
                for col in CATEGORY_COLUMNS:
                    got = by_method[name].get(col)
                    if got is None or not got["n"]:
                        cells.append("-")
                        continue
                    below = name == names[0] and any(
                        (other := by_method[n].get(col)) is not None and other[metric] > got[metric] for n in names[1:])
                    cells.append(f"{got[metric]:.3f}{' <' if below else ''}")
                rows.append([scope, name, *cells])
        print_table(f"{metric} per category ('<': recall below one of its parts)", ["conversation", "method", *headers],
                    rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    parser.add_argument("--preset", help="recall preset to evaluate (default: the configured one)")
    parser.add_argument("--no-baselines", action="store_true", help="skip the vector and BM25 baselines")
    parser.add_argument("--no-adversarial", action="store_true",
                        help="skip category 5 (the question names the wrong speaker; reported apart)")
    parser.add_argument("--graph", choices=("sqlite", "postgres"), default="sqlite",
                        help="the durable graph (postgres: a throwaway server unless --dsn names a database)")
    parser.add_argument("--dsn", help="an empty PostgreSQL database for --graph postgres")
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model> (of fastembed's catalogue)")
    args = parser.parse_args(argv)
    if args.graph == "postgres":
        with postgres_database(args.dsn) as dsn:
            result = run(args.data, args.preset, not args.no_baselines, dsn, args.embedder, not args.no_adversarial)
    else:
        result = run(args.data, args.preset, not args.no_baselines, embedder=args.embedder,
                     adversarial=not args.no_adversarial)
    report(result)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
