"""Consolidation under near-duplicates: row count and recall any@5 of a clean store, the same store with
near-duplicates generated from its own rows, and that store after ``memory-core consolidate``.

    python -m bench.quality.consolidation [--locomo ../shared/data/locomo_dev.json] [--copies 3] [--json PATH]

Two sets: LoCoMo dev (one memory per turn, as ``bench.quality.locomo`` ingests it; evidence by dia_id)
and the coding-agent set (``bench.data.coding``; any relevant memory by its key). The duplicated store
holds every row plus ``--copies`` near-duplicates of it, written by the same agent in the same session
seconds later: a prefix ("note: "), the text lower-cased without its closing punctuation, a small word
("the", "to", "in") of its second half left out (rows of six words or more; shorter ones get a suffix), then
prefixes and suffixes again; handoffs get none (their chain is their upkeep: consolidation leaves them). The
consolidated store is the duplicated one after :func:`memory_core.operator.consolidate` with the default
settings. Goals (issue 50): recall any@5 within one point of the clean store's, current rows within
1.2x the clean store's.

Rows are the current memories (what recall can return): a merged row stays in the graph as an older
version of its canonical (reversible), so the graph holds clean + copies + canonicals rows in all. A
recalled canonical stands for every row it merged (its ``consolidated.merged`` provenance): it counts as
evidence when any of them was (two turns of one text in two sessions merge into one canonical).
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.coding import generate
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_embedder
from bench.quality.metrics import Scoreboard
from bench.quality.ranking import HitBoard
from memory_core import AddItem, MemoryCore, MemoryRow
from memory_core.operator import consolidate
from memory_core.versions.chain import MERGED

LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo_dev.json"
KEY = "bench_key"
DEPTH = 20
WORD = re.compile(r"\S+")
Keys = Callable[[MemoryRow], list[str]]  # a recalled row -> the set's keys it stands for (its own first)
Scorer = Callable[[MemoryCore, Keys], float]  # store -> recall any@5


def near_duplicate(text: str, copy: int) -> str:
    """The ``copy``-th near-duplicate of ``text`` (0-based): the same fact, restated a little differently."""
    words = WORD.findall(text)
    kind = copy % 5
    if kind == 0:
        return f"note: {text}"
    if kind == 1:
        return text.lower().rstrip(".!?")
    if kind == 2:  # a small word of the middle left out ("the", "to", "in"): nothing of the fact is lost
        small = [i for i in range(len(words) // 4, len(words)) if words[i].isalpha() and len(words[i]) <= 4]
        if len(words) >= 6 and small:
            return " ".join(words[:small[0]] + words[small[0] + 1:])
        return f"{text} (again)"
    if kind == 3:
        return f"as noted: {text}"
    return f"{text} (repeated)"


def with_copies(items: Sequence[AddItem], copies: int) -> list[AddItem]:
    """Every item, and ``copies`` near-duplicates of it by the same agent in the same session, seconds later
    (not of handoffs: a handoff chain is its own upkeep, the newest supersedes the last, and consolidation
    leaves handoffs alone)."""
    out: list[AddItem] = []
    for item in items:
        out.append(item)
        for c in range(copies if item.get("type") != "handoff" else 0):
            dup: AddItem = {**item, "content": near_duplicate(item["content"], c),
                            "timestamp": item["timestamp"] + timedelta(seconds=c + 1)}  # type: ignore[operator]
            out.append(dup)
    return out


def add_all(core: MemoryCore, items: Sequence[AddItem], batch: int = 500) -> list[str]:
    refs = []
    for start in range(0, len(items), batch):
        refs += [r.ref for r in core.add_memories(list(items[start:start + batch]))]
    return refs


def own_key(row: MemoryRow) -> str:
    """The set's key a row carries: LoCoMo's dia_id (``source.id``), the coding set's key (metadata)."""
    return str(row.source.get("id") or row.metadata.get(KEY, ""))


def own_key_of(item: AddItem) -> str:
    return str((item.get("source") or {}).get("id") or (item.get("metadata") or {}).get(KEY, ""))


def merged_keys(core: MemoryCore, ref_key: dict[str, str]) -> Keys:
    """A canonical stands for every row it merged (``metadata.consolidated.merged``, canonicals of canonicals
    followed): its keys are theirs, its own first; any other row's is its own."""
    def keys(row: MemoryRow) -> list[str]:
        out, todo, seen = [own_key(row)], [row], set()
        while todo:
            mark = todo.pop().metadata.get(MERGED)
            for ref in mark.get("merged", []) if isinstance(mark, dict) else []:
                if ref in seen:
                    continue
                seen.add(ref)
                if ref in ref_key:
                    out.append(ref_key[ref])
                else:  # a canonical of an earlier round
                    todo.append(core.check_memory(row.tenant, ref).memory)
        return list(dict.fromkeys(out))

    return keys


def pick(keys: list[str], wanted: Iterable[str]) -> str:
    """The key a row counts as: one of the wanted ones when it stands for one, else its own."""
    hit = set(keys) & set(wanted)
    return min(hit) if hit else keys[0]


def current_rows(core: MemoryCore) -> int:
    maint = core.operator_parts().maintenance
    return sum(1 for t in maint.tenants_present() for r in maint.memory_rows(t) if r.node.valid_to_us is None)


# ---- the two sets ---------------------------------------------------------------------------------------
def locomo_set(path: Path) -> tuple[list[AddItem], Scorer]:
    conversations = load_locomo(path)
    items: list[AddItem] = [
        {"tenant": t.tenant, "session": t.session, "agent": t.agent, "content": t.content, "timestamp": t.timestamp,
         "source": {"id": t.source_id}, "type": "turn"} for conv in conversations for t in conv.turns]

    def score(core: MemoryCore, keys: Keys) -> float:
        board = Scoreboard()
        for conv in conversations:
            for qa in conv.qa:
                result = core.recall(qa.tenant, qa.question, limit=DEPTH)
                board.add(qa.category, [pick(keys(m), qa.evidence) for m in result.messages], qa.evidence)
        return board.summary()["micro"]["any@5"]

    return items, score


def coding_set() -> tuple[list[AddItem], Scorer]:
    w = generate()
    items: list[AddItem] = [
        {"tenant": "coding", "session": m.session, "agent": m.agent, "content": m.content, "type": m.type,
         "timestamp": m.timestamp, "metadata": {KEY: m.key}, **({"role": m.role} if m.role else {})}
        for m in w.memories]

    def score(core: MemoryCore, keys: Keys) -> float:
        board = HitBoard()
        for q in w.queries:
            result = core.recall("coding", q.text, limit=DEPTH)
            board.add([pick(keys(m), [q.target, *q.relevant]) for m in result.messages], q.target, q.relevant)
        return board.summary()["any@5"]

    return items, score


# ---- one set, three stores ------------------------------------------------------------------------------
def measure(name: str, items: list[AddItem], score: Scorer, copies: int, embedder: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"set": name, "copies": copies}
    with tempfile.TemporaryDirectory(prefix="consolidation-bench-") as tmp:
        with stage(f"{name}: clean store, {len(items)} rows"):
            core = open_bench_core(Path(tmp) / "clean", embedder)
            try:
                add_all(core, items)
                out["clean"] = {"rows": current_rows(core), "any@5": score(core, lambda m: [own_key(m)])}
            finally:
                core.close()
        duplicated = with_copies(items, copies)
        with stage(f"{name}: duplicated store, {len(duplicated)} rows"):
            core = open_bench_core(Path(tmp) / "dups", embedder)
            try:
                refs = add_all(core, duplicated)
                ref_key = {ref: own_key_of(item) for ref, item in zip(refs, duplicated, strict=True)}
                out["duplicated"] = {"rows": current_rows(core), "any@5": score(core, lambda m: [own_key(m)])}
                with stage(f"{name}: consolidate"):
                    start = time.perf_counter()
                    report = consolidate(core.operator_parts())
                    seconds = time.perf_counter() - start
                out["consolidated"] = {"rows": current_rows(core), "any@5": score(core, merged_keys(core, ref_key))}
                out["consolidate"] = {"seconds": round(seconds, 1), "merges": len(report.merges),
                                      "rows_retired": report.rows_retired,
                                      "rows_per_s": round(sum(report.scanned.values()) / seconds, 1)}
            finally:
                core.close()
    clean = out["clean"]
    out["goals"] = {
        "recall_within_1pt": clean["any@5"] - out["consolidated"]["any@5"] <= 0.01,
        "rows_within_1.2x": out["consolidated"]["rows"] <= 1.2 * clean["rows"],
    }
    return out


def run(locomo: Path | None, copies: int, embedder: str = "minilm") -> dict[str, Any]:
    emb = cached_embedder(embedder)
    sets: list[tuple[str, list[AddItem], Scorer]] = []
    if locomo is not None:
        sets.append(("LoCoMo dev", *locomo_set(locomo)))
    sets.append(("coding", *coding_set()))
    return {"copies": copies, "embedder": embedder,
            "sets": [measure(name, items, score, copies, emb) for name, items, score in sets]}


def report(result: dict[str, Any]) -> None:
    rows = []
    for s in result["sets"]:
        clean = s["clean"]
        for label in ("clean", "duplicated", "consolidated"):
            r = s[label]
            rows.append([s["set"], label, r["rows"], f"{r['rows'] / clean['rows']:.2f}x", f"{r['any@5']:.3f}",
                         f"{100 * (r['any@5'] - clean['any@5']):+.1f}"])
    print_table(f"consolidation — {result['copies']} near-duplicates per row, recall any@5",
                ["set", "store", "current rows", "vs clean", "any@5", "pts vs clean"], rows)
    print_table("consolidate", ["set", "seconds", "rows/s", "merges", "rows retired", "goals"],
                [[s["set"], s["consolidate"]["seconds"], s["consolidate"]["rows_per_s"], s["consolidate"]["merges"],
                  s["consolidate"]["rows_retired"], ", ".join(f"{k}: {'met' if v else 'MISSED'}"
                                                              for k, v in s["goals"].items())]
                 for s in result["sets"]])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=LOCOMO if LOCOMO.exists() else None,
                        help="a LoCoMo-format JSON file (default: ../shared/data/locomo_dev.json when present)")
    parser.add_argument("--no-locomo", action="store_true", help="only the coding set")
    parser.add_argument("--copies", type=int, default=3, help="near-duplicates generated per row")
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model>")
    parser.add_argument("--json", type=Path, help="write the results as JSON here")
    args = parser.parse_args(argv)
    result = run(None if args.no_locomo else args.locomo, args.copies, args.embedder)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
