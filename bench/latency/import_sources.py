"""How fast a user moves in: ``import --from mcp-memory`` of a generated memory.json, and a rerun
of it (which must write nothing), per memory written; and how fast mem0 dumps are read.

    python -m bench.latency.import_sources [--entities 500] [--observations 8] [--minilm] [--json PATH]
                                           [--dumps 5000,20000,100000]

The graph has ``entities`` entities of five kinds, ``observations`` observations each and one relation
per entity (to the next one). Embedded stores (SQLite + Chroma persistent); the hash embedder by
default, so the numbers are the import's and the stores' work; ``--minilm`` embeds with the local
model as a real move-in would.

``--dumps N,N,…`` reads generated mem0 dumps of N memories (a ``get_all`` JSON, pretty-printed as
``json.dump(..., indent=2)`` writes it, and the same memories as JSON Lines) with the mem0 reader
alone: the time to turn the file into items, which must grow linearly with N.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, sentence, stage
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import HashEmbedder, shared_minilm
from memory_core.importers import import_source

KINDS = ("person", "service", "team", "project", "location")


def memory_json(path: Path, entities: int, observations: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for e in range(entities):
            fh.write(json.dumps({"type": "entity", "name": f"Entity {e}", "entityType": KINDS[e % len(KINDS)],
                                 "observations": [sentence(e * observations + o, words=12)
                                                  for o in range(observations)]}) + "\n")
        for e in range(entities):
            fh.write(json.dumps({"type": "relation", "from": f"Entity {e}", "to": f"Entity {(e + 1) % entities}",
                                 "relationType": "depends_on"}) + "\n")


def mem0_dump(path: Path, memories: int, *, lines: bool) -> None:
    """``memories`` mem0 memories as ``get_all`` returns them: ``{"results": [...]}`` (or one a line)."""
    records = [{"id": f"{i:08x}-0000-4000-8000-000000000000", "memory": sentence(i, words=12), "hash": f"{i:032x}",
                "metadata": {"source": "bench"}, "created_at": "2026-02-20T08:15:30.123456-08:00",
                "updated_at": None, "user_id": f"user{i % 7}"} for i in range(memories)]
    with path.open("w", encoding="utf-8") as fh:
        if lines:
            fh.writelines(json.dumps(r) + "\n" for r in records)
        else:
            json.dump({"results": records}, fh, indent=2)


def read_mem0(sizes: list[int]) -> list[list[Any]]:
    """Seconds to read a mem0 dump of each size, as JSON and as JSON Lines (the reader alone)."""
    from memory_core.importers import mem0

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            row: list[Any] = [n]
            for lines in (False, True):
                path = Path(tmp) / ("dump.jsonl" if lines else "dump.json")
                mem0_dump(path, n, lines=lines)
                with stage(f"read {n} mem0 memories ({'JSONL' if lines else 'JSON'})"):
                    t0 = time.perf_counter()
                    items = sum(1 for _ in mem0.read(path))
                    row.append(round(time.perf_counter() - t0, 2))
                assert items >= n, items
            out.append(row)
    return out


def run(entities: int, observations: int, embedder: Embedder) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "memory.json"
        memory_json(source, entities, observations)
        core = open_bench_core(Path(tmp) / "data", embedder)
        try:
            with stage("dry run"):
                t0 = time.perf_counter()
                dry = import_source(core.operator_parts(), "mcp-memory", source, "bench", dry_run=True)
                dry_s = time.perf_counter() - t0
            with stage(f"import {dry.written} memories"):
                t0 = time.perf_counter()
                first = import_source(core.operator_parts(), "mcp-memory", source, "bench")
                first_s = time.perf_counter() - t0
            with stage("rerun"):
                t0 = time.perf_counter()
                again = import_source(core.operator_parts(), "mcp-memory", source, "bench")
                again_s = time.perf_counter() - t0
            assert first.written == dry.written and again.written == 0 and again.skipped == first.written
        finally:
            core.close()
    n = first.written
    return {"memories": n, "entities": first.entities, "relations": first.relations,
            "dry_run_s": round(dry_s, 2), "import_s": round(first_s, 2), "rerun_s": round(again_s, 2),
            "import_per_s": round(n / first_s, 1), "rerun_per_s": round(n / again_s, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=500)
    parser.add_argument("--observations", type=int, default=8)
    parser.add_argument("--minilm", action="store_true", help="embed with the local model (default: hash embedder)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--dumps", help="read mem0 dumps of these sizes instead (comma-separated, e.g. 5000,20000)")
    args = parser.parse_args()
    if args.dumps:
        table = read_mem0([int(n) for n in args.dumps.split(",")])
        print_table("mem0 reader (seconds)", ["memories", "JSON", "JSON Lines"], table)
        if args.json:
            args.json.write_text(json.dumps(table) + "\n", encoding="utf-8")
        return
    embedder: Embedder = shared_minilm() if args.minilm else HashEmbedder()
    result = run(args.entities, args.observations, embedder)
    print_table("import --from mcp-memory", list(result), [list(result.values())])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
