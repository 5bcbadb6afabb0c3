"""Core store benchmark: write throughput vs raw Chroma, recent-turn paging at scale, cold open.

    python -m bench.latency.core [--rows 200] [--sizes 1000,10000,100000] [--json PATH]

Everything is measured side by side in one run on this machine:
1. add_memory (one row a call) and add_memories (batches of 32) against a raw Chroma
   ``collection.add`` of the same texts with the same real MiniLM embedder, as ratios; then the
   same with texts that name people, services, handles, paths and error codes (the entity
   extractor finds them) and two declared entities and a relation on every add;
2. query_recent_turns page latency (limit 20, first page and a page from the middle)
   for sessions of 1k, 10k and 100k turns, loaded through the real write path with
   synthetic vectors (the real model costs ~12 ms a row);
3. cold open (a fresh process) of the 100k-memory data directory.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common import SyntheticEmbedder, open_bench_core, percentiles, print_table, sentence, stage, timed
from memory_core.embedding.local import shared_minilm


def raw_chroma_rate(texts: list[str], batch: int, path: Path) -> float:
    import chromadb

    client = chromadb.PersistentClient(path=str(path), settings=chromadb.Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("raw", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    emb = shared_minilm()
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        chunk = texts[i : i + batch]
        col.add(ids=[f"r{i + j}" for j in range(len(chunk))], embeddings=emb.embed(chunk), documents=chunk,
                metadatas=[{"tenant": "bench", "session": "s"} for _ in chunk])
    return len(texts) / (time.perf_counter() - start)


PEOPLE = ("Alice Moreau", "Bob Tanaka", "Carol Diaz", "Dmitri Volkov", "Erin Walsh")


def entity_text(i: int) -> str:
    """A turn that names things the way project memories do (capitalised names, a handle, a path,
    an error code, a service id, a date)."""
    return (f"{sentence(i, 10)} {PEOPLE[i % 5]} says Payments Gateway {i % 17} failed with ERR_CONN_RESET; "
            f"see src/payments/client_{i % 9}.py, ping @ops-{i % 3} about payments-api-{i % 11} "
            f"by 2026-03-{i % 28 + 1:02d}.")


def declared(i: int) -> dict[str, Any]:
    """Two declared entities and a relation between them."""
    person, project = PEOPLE[i % 5], f"Project {i % 40}"
    return {"entities": [{"name": person, "kind": "person"},
                         {"name": project, "kind": "project", "aliases": [f"p{i % 40}"]}],
            "relations": [{"from": person, "to": project, "label": "works on"}]}


def core_rate(texts: list[str], batch: int, path: Path, *, entities: bool = False) -> float:
    core = open_bench_core(path, shared_minilm())
    extra = [declared(i) if entities else {} for i in range(len(texts))]
    try:
        start = time.perf_counter()
        if batch == 1:
            for t, more in zip(texts, extra, strict=True):
                core.add_memory("bench", "s", "agent", t, **more)
        else:
            for i in range(0, len(texts), batch):
                core.add_memories([{"tenant": "bench", "session": "s", "agent": "agent", "content": t, **more}
                                   for t, more in zip(texts[i : i + batch], extra[i : i + batch], strict=True)])
        return len(texts) / (time.perf_counter() - start)
    finally:
        core.close()


def throughput(rows: int, root: Path) -> dict[str, Any]:
    shared_minilm().embed(["warm up the model"])
    out: dict[str, Any] = {}
    for named in (False, True):
        for batch in (1, 32):
            raw, ours = [], []
            for rnd in range(2):  # interleaved rounds: noise hits both sides alike
                seed = rnd * 100_000 + batch * 1000
                texts = [(entity_text if named else sentence)(seed + i) for i in range(rows)]
                tag = f"{batch}-{rnd}-{int(named)}"
                raw.append(raw_chroma_rate(texts, batch, root / f"raw-{tag}"))
                ours.append(core_rate(texts, batch, root / f"core-{tag}", entities=named))
            out[f"batch_{batch}" + ("_entities" if named else "")] = {
                "raw_rows_per_s": round(max(raw), 1), "core_rows_per_s": round(max(ours), 1),
                "ratio": round(max(ours) / max(raw), 3)}
    return out


def load_session(path: Path, n: int) -> None:
    core = open_bench_core(path, SyntheticEmbedder())
    try:
        base = 1_700_000_000
        for i in range(0, n, 1000):
            core.add_memories([
                {"tenant": "bench", "session": "big", "agent": f"agent{j % 4}", "content": sentence(j, 12),
                 "timestamp": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(base + j))}+00:00"}
                for j in range(i, min(n, i + 1000))
            ])
    finally:
        core.close()


def paging(path: Path, n: int, reps: int = 300) -> dict[str, Any]:
    core = open_bench_core(path, SyntheticEmbedder())
    try:
        first = [timed(lambda: core.query_recent_turns("bench", "big", limit=20))[0] for _ in range(reps)]
        cursor = None
        for _ in range(n // 40):  # walk to the middle of the session
            cursor = core.query_recent_turns("bench", "big", limit=20, cursor=cursor).next_cursor
        middle = [timed(lambda c=cursor: core.query_recent_turns("bench", "big", limit=20, cursor=c))[0]
                  for _ in range(reps)]
        return {"first_page": percentiles(first), "middle_page": percentiles(middle)}
    finally:
        core.close()


def cold_open(path: Path) -> float:
    code = (
        "import time; t=time.perf_counter();"
        "from memory_core import MemoryCore; from memory_core.settings import load_settings;"
        "from bench.common import SyntheticEmbedder;"
        f"c=MemoryCore.open({str(path)!r}, settings=load_settings(environ={{}}), embedder=SyntheticEmbedder());"
        "print(time.perf_counter()-t); c.close()"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).parents[2])
    if out.returncode != 0:
        raise SystemExit(f"cold open failed:\n{out.stderr}")
    return float(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200, help="rows per throughput round (real embedder)")
    parser.add_argument("--sizes", default="1000,10000,100000", help="session sizes for paging")
    parser.add_argument("--throughput-only", action="store_true", help="skip paging and cold open")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"machine_note": "2-core sandbox; ratios measured side by side in one run"}
    with tempfile.TemporaryDirectory(prefix="mc-bench-") as tmp:
        root = Path(tmp)
        with stage(f"write throughput, {args.rows} rows x 2 rounds, real MiniLM embedder"):
            results["throughput"] = throughput(args.rows, root)
        results["paging"] = {}
        for n in [] if args.throughput_only else sizes:
            with stage(f"load a {n}-turn session through add_memories (synthetic vectors)"):
                load_session(root / f"s{n}", n)
            results["paging"][n] = paging(root / f"s{n}", n)
        if not args.throughput_only:
            with stage(f"cold open of the {sizes[-1]}-memory directory in a fresh process"):
                results["cold_open_s"] = round(cold_open(root / f"s{sizes[-1]}"), 2)
                results["cold_open_memories"] = sizes[-1]
    tp = results["throughput"]
    print_table("Write throughput vs raw Chroma add (same texts, same MiniLM embedder)",
                ["path", "raw rows/s", "memory-core rows/s", "ratio", "goal"],
                [["single add", tp["batch_1"]["raw_rows_per_s"], tp["batch_1"]["core_rows_per_s"],
                  tp["batch_1"]["ratio"], ">= 0.5"],
                 ["batch of 32", tp["batch_32"]["raw_rows_per_s"], tp["batch_32"]["core_rows_per_s"],
                  tp["batch_32"]["ratio"], ">= 0.8"],
                 ["single add, named entities", tp["batch_1_entities"]["raw_rows_per_s"],
                  tp["batch_1_entities"]["core_rows_per_s"], tp["batch_1_entities"]["ratio"], ">= 0.5"],
                 ["batch of 32, named entities", tp["batch_32_entities"]["raw_rows_per_s"],
                  tp["batch_32_entities"]["core_rows_per_s"], tp["batch_32_entities"]["ratio"], ">= 0.8"]])
    if args.throughput_only:
        if args.json:
            args.json.write_text(json.dumps(results, indent=2))
        return results
    pg = results["paging"]
    base = pg[sizes[0]]["first_page"]["p50_ms"]
    print_table("query_recent_turns, limit 20 (rows loaded with synthetic vectors)",
                ["session turns", "first page p50 ms", "p95 ms", "middle page p50 ms", f"vs {sizes[0]}"],
                [[n, pg[n]["first_page"]["p50_ms"], pg[n]["first_page"]["p95_ms"], pg[n]["middle_page"]["p50_ms"],
                  round(pg[n]["first_page"]["p50_ms"] / base, 2)] for n in sizes])
    print(f"\nCold open with {sizes[-1]} memories (fresh process): {results['cold_open_s']} s")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
