"""MADial-Bench memory recall through ``MemoryCore.recall`` / ``recall_with_context``.

    python -m bench.quality.madial [--data ../shared/data/madial] [--preset NAME] [--json PATH]
                           [--own-sessions]

Protocol (issue 12): one tenant holds all memories (type ``event``, timestamp = the
memory's date, agent ``memory-bank``, session = the month of the date, or one session per
memory with ``--own-sessions``). For each test turn the query is the user's last utterance
before it and the context is the dialogue before that; the target is ``relevant-id[0]``,
any@5 counts any listed id. Raw vector search and plain BM25 over the same memories run
next to it. The data is read at run time from the path given, never copied here.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.latency.embed_cache import cached_embedder
from bench.quality.ranking import Bm25Baseline, HitBoard, vector_rank
from memory_core import MemoryCore

DEPTH = 10
TENANT = "madial"
LINE = re.compile(r'^<([^>]+)>:\s*"?(.*?)"?\s*$', re.S)


@dataclass(frozen=True)
class Probe:
    query: str
    context: list[dict[str, str]]  # {role, content}, oldest first
    target: str
    relevant: tuple[str, ...]


def load_memories(root: Path) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for line in (root / "madial_memory.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.extend(json.loads(line).items())
    return out


def _turn(raw: str) -> tuple[str, str] | None:
    m = LINE.match(raw.strip())
    return (m.group(1), m.group(2).strip()) if m else None


def load_probes(root: Path) -> list[Probe]:
    probes = []
    for line in (root / "madial_dev_dialogue.jsonl").read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        d = json.loads(line)
        ids = tuple(str(i) for i in d["relevant-id"])
        for t in d["test-turn"]:
            before = [x for x in (_turn(r) for r in d["dialogue"][:t]) if x is not None]
            users = [i for i, (who, _text) in enumerate(before) if who.lower() != "assistant"]
            if not users:
                continue
            last = users[-1]
            context = [{"role": "assistant" if who.lower() == "assistant" else "user", "content": text}
                       for who, text in before[:last]]
            probes.append(Probe(before[last][1], context, ids[0], ids))
    return probes


@dataclass
class Loaded:
    probes: list[Probe]
    ref_to_id: dict[str, str]
    bm25: Bm25Baseline
    memories: int


def ingest(core: MemoryCore, root: Path, own_sessions: bool) -> Loaded:
    """Every memory into the one tenant, through ``add_memories``."""
    memories = load_memories(root)
    items = []
    for mid, m in memories:
        when = datetime.strptime(m["time"], "%Y-%m-%d").replace(tzinfo=UTC)
        items.append({"tenant": TENANT, "agent": "memory-bank", "type": "event", "content": m["event"],
                      "session": f"m{mid}" if own_sessions else when.strftime("%Y-%m"),
                      "timestamp": when, "source": {"id": mid}})
    results = core.add_memories(items)
    ref_to_id = {r.ref: mid for r, (mid, _m) in zip(results, memories, strict=True)}
    return Loaded(load_probes(root), ref_to_id, Bm25Baseline([(mid, m["event"]) for mid, m in memories]),
                  len(memories))


def score(core: MemoryCore, data: Loaded, options: dict[str, Any], with_context: bool) -> dict[str, float]:
    board = HitBoard()
    for p in data.probes:
        if with_context:
            res = core.recall_with_context(TENANT, p.query, p.context, limit=DEPTH, **options)
        else:
            res = core.recall(TENANT, p.query, limit=DEPTH, **options)
        board.add([data.ref_to_id[m.ref] for m in res.messages], p.target, p.relevant)
    return board.summary()


def run(root: Path, preset: str | None, own_sessions: bool, embedder: str = "minilm") -> dict[str, Any]:
    options = {"preset": preset} if preset else {}
    with tempfile.TemporaryDirectory(prefix="madial-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(embedder))
        try:
            with stage("ingest and score"):
                data = ingest(core, root, own_sessions)
                vector, bm25 = HitBoard(), HitBoard()
                for p in data.probes:
                    vector.add(vector_rank(core, TENANT, p.query, data.ref_to_id, DEPTH), p.target, p.relevant)
                    bm25.add(data.bm25.rank(p.query, DEPTH), p.target, p.relevant)
                methods = {"raw vector": vector.summary(), "bm25": bm25.summary(),
                           "recall": score(core, data, options, False),
                           "recall_with_context": score(core, data, options, True)}
        finally:
            core.close()
    return {"data": str(root), "probes": len(data.probes), "memories": data.memories,
            "own_sessions": own_sessions, "methods": methods}


def report(result: dict[str, Any]) -> None:
    methods = result["methods"]
    metrics = [m for m in next(iter(methods.values())) if m != "n"]
    rows = [[name, *(f"{s[m]:.3f}" for m in metrics)] for name, s in methods.items()]
    print_table(f"MADial dev — {result['probes']} test turns, {result['memories']} memories", ["method", *metrics],
                rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/madial"))
    parser.add_argument("--preset")
    parser.add_argument("--own-sessions", action="store_true", help="one session per memory")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model> (of fastembed's catalogue)")
    args = parser.parse_args(argv)
    result = run(args.data, args.preset, args.own_sessions, args.embedder)
    report(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
