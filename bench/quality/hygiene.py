"""Memory that stays clean as it grows: the LoCoMo dev and coding sets with ten times their size added as junk.

    python -m bench.quality.hygiene --data ../shared/data/locomo_dev.json [--json PATH] [--junk 10]

Junk is generated from each set's own rows, as agents and harnesses write it: acknowledgements
("ok", "thanks", ``NO_REPLY``), heartbeats, a harness's bookkeeping ("[Request interrupted by user]")
and exact repeats of the agent's own rows a few seconds later, in the same sessions, by the same agents.
Each set is loaded three times through ``core.add_memories``, with the same embedder: clean (hygiene
off), junked with hygiene off, and junked with hygiene on; the tables put rows stored and recall any@5
side by side. Then the labelled sets of the tests (``testbed/labelled/hygiene``, ``testbed/labelled/poisoning``:
``labelled.jsonl``, which the rules were written against, and ``heldout.jsonl``, written after them and
never tuned on) give the precision and recall of write-time hygiene and of the poisoning scan.

One function per half of issue 50's measure: :func:`hygiene_half` here; the consolidation half is added
beside it (a function taking the same loaded sets) and called from :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from bench.common import print_table, stage
from bench.data.coding import generate
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_embedder
from bench.quality.metrics import score_one
from memory_core import AddItem, MemoryCore
from memory_core.settings import load_settings
from memory_core.write.hygiene import junk_reason
from memory_core.write.poisoning import scan
from testbed.labelled_sets import labelled_set

JUNK_ACKS = ("ok", "Ok.", "okay!", "thanks", "Thanks!", "thank you", "got it", "Got it, thanks.", "noted",
             "Sounds good!", "cool", "will do", "NO_REPLY", "[NO_REPLY]", "HEARTBEAT_OK", "👍", "...")
JUNK_BOOKKEEPING = ("[Request interrupted by user]", "Conversation compacted", "[context compacted]",
                    "Session started", "(no content)", "No response requested.", "Continue from where you left off.",
                    "<command-name>/clear</command-name>", "typing...", "[gateway] connected", "memory stored")
DEPTH = 10


@dataclass(frozen=True)
class Item:
    """One row to add and the key recall is scored by (an evidence id; ``junk:…`` for junk)."""

    add: dict[str, Any]
    key: str


@dataclass(frozen=True)
class Question:
    tenant: str
    text: str
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class Dataset:
    name: str
    rows: list[Item]
    questions: list[Question]


def locomo_set(path: Path) -> Dataset:
    """LoCoMo dev: one row per turn (as ``bench.quality.locomo`` ingests them), its QA items of categories 1-4."""
    rows, questions = [], []
    for conv in load_locomo(path):
        for t in conv.turns:
            rows.append(Item({"tenant": t.tenant, "session": t.session, "agent": t.agent, "content": t.content,
                              "timestamp": t.timestamp + timedelta(seconds=t.position), "type": "turn",
                              "source": {"id": t.source_id}}, t.source_id))
        questions += [Question(qa.tenant, qa.question, tuple(qa.evidence)) for qa in conv.qa]
    return Dataset("LoCoMo dev", rows, questions)


def coding_set() -> Dataset:
    """The coding agent's workload (``bench.data.coding``): its memories and its queries' relevant keys."""
    w = generate()
    rows = [Item({"tenant": "coding", "session": m.session, "agent": m.agent, "content": m.content, "type": m.type,
                  "timestamp": m.timestamp, **({"role": m.role} if m.role else {})}, m.key) for m in w.memories]
    return Dataset("coding", rows, [Question("coding", q.text, tuple(q.relevant)) for q in w.queries])


def junked(data: Dataset, times: int, seed: int = 50) -> Dataset:
    """``data`` with ``times`` its size of junk drawn from its own rows: acknowledgements, heartbeats and
    bookkeeping by the same agents in the same sessions, and exact repeats of a row by its agent seconds later."""
    rng = random.Random(seed)
    extra: list[Item] = []
    for n in range(times * len(data.rows)):
        base = rng.choice(data.rows)
        add = dict(base.add)
        ts = add["timestamp"] + timedelta(seconds=rng.randint(1, 120))
        kind = rng.random()
        if kind < 0.25:  # the agent's exact repeat: the same evidence, stored twice without hygiene
            extra.append(Item({**add, "timestamp": ts}, base.key))
            continue
        if kind < 0.6:
            text = rng.choice(JUNK_ACKS)
        elif kind < 0.8:
            text = f"[heartbeat] {ts.isoformat()} seq={n} status=ok"
        else:
            text = rng.choice(JUNK_BOOKKEEPING)
        extra.append(Item({**add, "content": text, "timestamp": ts, "source": {"id": f"junk:{n}"},
                           "type": "turn"}, f"junk:{n}"))
    rows = data.rows + extra
    return Dataset(f"{data.name} + {times}× junk", rows, data.questions)


def load(data: Dataset, directory: Path, hygiene: bool, embedder: Any) -> tuple[MemoryCore, dict[str, str], int]:
    """A store holding ``data`` (hygiene on or off): the core, ref -> key of the rows stored, rows stored."""
    settings = load_settings(environ={}, overrides={"hygiene": {"enabled": hygiene}})
    core = MemoryCore.open(directory, settings=settings, embedder=embedder)
    ref_to_key: dict[str, str] = {}
    stored = 0
    batch = 500
    for start in range(0, len(data.rows), batch):
        chunk = data.rows[start : start + batch]
        for item, result in zip(chunk, core.add_memories([cast(AddItem, i.add) for i in chunk]), strict=True):
            if result.stored and result.ref is not None:
                stored += 1
                ref_to_key.setdefault(result.ref, item.key)
    return core, ref_to_key, stored


def any_at_5(core: MemoryCore, ref_to_key: dict[str, str], questions: Sequence[Question]) -> float:
    """The share of questions with a relevant row among recall's first five."""
    hits = 0.0
    for q in questions:
        ranked = [ref_to_key.get(m.ref, "") for m in core.recall(q.tenant, q.text, limit=DEPTH).messages]
        hits += score_one(ranked, q.relevant, (5,))["any@5"]
    return hits / len(questions) if questions else 0.0


def hygiene_half(sets: Sequence[Dataset], times: int, embedder: Any) -> list[dict[str, Any]]:
    """Rows stored and any@5 of each set: clean, junked without hygiene, junked with hygiene."""
    out = []
    for data in sets:
        noisy = junked(data, times)
        row: dict[str, Any] = {"set": data.name, "rows": len(data.rows), "junk_added": len(noisy.rows) - len(data.rows)}
        for label, dataset, on in (("clean", data, False), ("junked, hygiene off", noisy, False),
                                   ("junked, hygiene on", noisy, True)):
            with stage(f"{data.name}: {label} ({len(dataset.rows)} rows)"), \
                    tempfile.TemporaryDirectory(prefix="hygiene-bench-") as tmp:
                core, ref_to_key, stored = load(dataset, Path(tmp) / "store", on, embedder)
                try:
                    row[label] = {"stored": stored, "any@5": round(any_at_5(core, ref_to_key, data.questions), 4)}
                finally:
                    core.close()
        out.append(row)
    return out


def precision_recall(rows: Sequence[dict[str, Any]], positive: str, found: Callable[[dict[str, Any]], bool]
                     ) -> dict[str, float]:
    """Precision and recall of ``found`` against the label ``positive``, with the counts."""
    tp = sum(1 for r in rows if r[positive] and found(r))
    fp = sum(1 for r in rows if not r[positive] and found(r))
    fn = sum(1 for r in rows if r[positive] and not found(r))
    return {"positives": tp + fn, "negatives": sum(1 for r in rows if not r[positive]), "tp": tp, "fp": fp,
            "fn": fn, "precision": round(tp / (tp + fp), 4) if tp + fp else 1.0,
            "recall": round(tp / (tp + fn), 4) if tp + fn else 1.0}


def labelled_scores() -> dict[str, dict[str, float]]:
    """Write-time hygiene on its labelled set (junk vs short real facts) and the poisoning scan on its
    corpus (injections in the style of public sets vs engineering notes that say run, ignore, delete)."""
    out = {}
    for part in ("labelled", "heldout"):
        out[f"hygiene ({part})"] = precision_recall(labelled_set("hygiene", part), "junk",
                                                    lambda r: junk_reason(r["text"]) is not None)
        out[f"poisoning scan ({part})"] = precision_recall(labelled_set("poisoning", part), "poisoned",
                                                           lambda r: bool(scan(r["text"])))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format JSON file (LoCoMo dev)")
    parser.add_argument("--junk", type=int, default=10, help="junk rows added per row of each set")
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model>")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    scores = labelled_scores()
    sets = [locomo_set(args.data), coding_set()]
    hygiene = hygiene_half(sets, args.junk, cached_embedder(args.embedder))
    labels = ("clean", "junked, hygiene off", "junked, hygiene on")
    print_table(f"rows stored — each set and {args.junk}× its size of junk", ["set", "rows", "junk added", *labels],
                [[h["set"], h["rows"], h["junk_added"], *(h[k]["stored"] for k in labels)] for h in hygiene])
    print_table("recall any@5 — the set's own questions", ["set", *labels],
                [[h["set"], *(f"{h[k]['any@5']:.3f}" for k in labels)] for h in hygiene])
    print_table("labelled precision / recall", ["rule", "positives", "negatives", "fp", "fn", "precision", "recall"],
                [[n, s["positives"], s["negatives"], s["fp"], s["fn"], f"{s['precision']:.3f}", f"{s['recall']:.3f}"]
                 for n, s in scores.items()])
    if args.json:
        args.json.write_text(json.dumps({"hygiene": hygiene, "labelled": scores}, indent=2, default=str) + "\n",
                             encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
