"""Fleet benchmark: many agents each adding one turn a call at once, with a recaller beside them.

    python -m bench.fleet [--writers 1,4,8,32] [--seconds 15] [--paths mcp,library] [--preload 500]
                          [--embedder minilm] [--json PATH]

Everything is measured side by side in one run, on one machine, with the same embedder (the real
default MiniLM model unless ``--embedder hash``) and the same kind of texts:

1. raw Chroma: ``collection.add`` of batches of 32 texts embedded by the same model (a fresh
   collection each round; three rounds spread over the run, the best one kept as the baseline);
2. for each path — the real MCP server over streamable HTTP (a ``memory-core serve --http``
   subprocess; the clients run in this process), and the library (threads of this process) — two
   stores side by side, one with group commit on (the defaults) and one with it off
   (``write.batch_max = 1``, every add written alone as before):
   - idle recall latency, and a lone writer's add latency, in alternating blocks on the two stores;
   - for each writer count N: N writers adding one turn a call (each its own session, agent and
     connection) and one recaller, for ``--seconds``: rows/s, add p50/p95, recall p50/p95 under
     that load, and the batches the store formed.

The goals (issue 40), as ratios of figures measured in this run: 8 writers >= 0.8x raw Chroma
batch-32 rows/s; add p95 at 8 writers <= 4x a lone add's p50; recall p95 at 8 writers <= 3x its
idle p50; a lone add's p50 with group commit within 5 % of the one without.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.common import open_bench_core, percentiles, print_table, sentence, stage
from memory_core import MemoryCore
from memory_core.embedding.local import Embedder, HashEmbedder, shared_minilm
from memory_core.settings.schema import load_settings
from tests.support.mcp_harness import http_client, running_http_server
from tools.auth import hash_token

TENANT = "fleet"
MODES = {"on": {}, "off": {"batch_max": 1}}  # group commit with the defaults / every add alone
QUERY_WORDS = ("deploy", "cache", "billing", "replica", "rollback", "latency", "schema", "handoff", "tenant", "trace")
GOALS = {"throughput_8_vs_raw_batch32": 0.8, "add_p95_8_vs_lone_p50": 4.0, "recall_p95_8_vs_idle_p50": 3.0,
         "lone_add_p50_on_vs_off": 1.05}


def embedder_of(name: str) -> Embedder:
    return HashEmbedder() if name == "hash" else shared_minilm()


class Texts:
    """Unique turns for every add of the run (thread-safe), from the same generator as the raw baseline."""

    def __init__(self, start: int) -> None:
        self._next = itertools.count(start)
        self._lock = threading.Lock()

    def __call__(self) -> str:
        with self._lock:
            return sentence(next(self._next))


def query(i: int) -> str:
    return f"{QUERY_WORDS[i % 10]} {QUERY_WORDS[(i * 7 + 3) % 10]} {QUERY_WORDS[(i * 3 + 1) % 10]}"


# ---- raw Chroma -----------------------------------------------------------------------------------
def raw_chroma_batch32(embedder: Embedder, texts: list[str], path: Path) -> float:
    """rows/s of ``collection.add`` in batches of 32, each batch embedded by ``embedder`` first."""
    import chromadb

    client = chromadb.PersistentClient(path=str(path), settings=chromadb.Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("raw", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    start = time.perf_counter()
    for i in range(0, len(texts), 32):
        chunk = texts[i : i + 32]
        col.add(ids=[f"r{i + j}" for j in range(len(chunk))], embeddings=embedder.embed(chunk), documents=chunk,
                metadatas=[{"tenant": TENANT, "session": "s"} for _ in chunk])
    return len(texts) / (time.perf_counter() - start)


# ---- stores ---------------------------------------------------------------------------------------
def settings_env(embedder: str, mode: str) -> dict[str, str]:
    env = {"MEMORY_CORE_EMBEDDING_PROVIDER": embedder}
    env.update({f"MEMORY_CORE_WRITE_{k.upper()}": str(v) for k, v in MODES[mode].items()})
    return env


def preload(path: Path, embedder: Embedder, rows: int, texts: Texts) -> None:
    """``rows`` turns over 20 sessions, so recall has a store to search from the start."""
    core = open_bench_core(path, embedder)
    try:
        for i in range(0, rows, 32):
            core.add_memories([{"tenant": TENANT, "session": f"old{j % 20}", "agent": f"agent{j % 8}",
                                "content": texts()} for j in range(i, min(rows, i + 32))])
    finally:
        core.close()


def open_library_core(path: Path, embedder: Embedder, mode: str) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"write": dict(MODES[mode])})
    return MemoryCore.open(path, settings=settings, embedder=embedder)


# ---- one path: how a writer adds and a recaller recalls ---------------------------------------
class LibraryPath:
    """The library: writers and the recaller are threads of this process calling one MemoryCore."""

    name = "library"

    def __init__(self, cores: dict[str, MemoryCore]) -> None:
        self.cores = cores

    def batches(self, mode: str) -> dict[str, float] | None:
        return self.cores[mode].write_batching()

    def run(self, mode: str, writers: int, seconds: float, recaller: bool, texts: Texts,
            queries: int | None = None) -> dict[str, Any]:
        core = self.cores[mode]
        adds: list[float] = []
        recalls: list[float] = []
        stop = threading.Event()

        def writer(i: int) -> None:
            while not stop.is_set():
                text = texts()
                t = time.perf_counter()
                core.add_memory(TENANT, f"w{i}", f"agent{i}", text)
                adds.append(time.perf_counter() - t)

        def recall() -> None:
            n = 0
            while not stop.is_set() and (queries is None or n < queries):
                t = time.perf_counter()
                core.recall(TENANT, query(n), limit=10)
                recalls.append(time.perf_counter() - t)
                n += 1

        threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
        if recaller:
            threads.append(threading.Thread(target=recall))
        start = time.perf_counter()
        for t in threads:
            t.start()
        if writers:
            time.sleep(seconds)
            stop.set()
        for t in threads:
            t.join()
        return {"elapsed_s": time.perf_counter() - start, "adds": adds, "recalls": recalls}


class McpPath:
    """The real MCP server over streamable HTTP: a server subprocess per store, clients in this process."""

    name = "mcp"

    def __init__(self, urls: dict[str, str], operator_token: str) -> None:
        self.urls = urls
        self.operator_token = operator_token

    def batches(self, mode: str) -> dict[str, float] | None:
        """The store's batch counts, as its inspector's Health page shows them to an operator."""
        base = self.urls[mode].rsplit("/mcp", 1)[0]
        page = httpx.get(f"{base}/ui/health", headers={"Authorization": f"Bearer {self.operator_token}"}, timeout=60)
        found = re.search(r"([\d,]+) written in ([\d,]+) batches since start", page.text)
        if found is None:
            return None
        rows, batches = (int(found.group(i).replace(",", "")) for i in (1, 2))
        return {"rows": rows, "batches": batches}

    def run(self, mode: str, writers: int, seconds: float, recaller: bool, texts: Texts,
            queries: int | None = None) -> dict[str, Any]:
        return anyio.run(self._run, self.urls[mode], writers, seconds, recaller, texts, queries)

    async def _run(self, url: str, writers: int, seconds: float, recaller: bool, texts: Texts,
                   queries: int | None) -> dict[str, Any]:
        adds: list[float] = []
        recalls: list[float] = []
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(http_client(url, None)) for _ in range(writers + recaller)]
            stop_at = time.perf_counter() + seconds

            async def writer(i: int) -> None:
                while time.perf_counter() < stop_at:
                    args = {"tenant": TENANT, "session": f"w{i}", "agent": f"agent{i}", "content": texts()}
                    t = time.perf_counter()
                    result = await clients[i].call_tool("add_memory", args)
                    adds.append(time.perf_counter() - t)
                    if result.is_error:
                        raise RuntimeError(f"add_memory failed: {result.content}")

            async def recall() -> None:
                n = 0
                while (time.perf_counter() < stop_at if writers else n < (queries or 0)):
                    t = time.perf_counter()
                    result = await clients[-1].call_tool("recall", {"tenant": TENANT, "query": query(n), "limit": 10})
                    recalls.append(time.perf_counter() - t)
                    n += 1
                    if result.is_error:
                        raise RuntimeError(f"recall failed: {result.content}")

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(writers):
                    tg.start_soon(writer, i)
                if recaller:
                    tg.start_soon(recall)
            return {"elapsed_s": time.perf_counter() - start, "adds": adds, "recalls": recalls}


Driver = LibraryPath | McpPath


# ---- the measurements of one path -----------------------------------------------------------------
def alternating(path: Driver, fn: Callable[[str], list[float]], blocks: int) -> dict[str, dict[str, float]]:
    """``fn(mode)`` in alternating blocks (on, off, off, on, ...): noise hits both modes alike."""
    got: dict[str, list[float]] = {m: [] for m in MODES}
    for b in range(blocks):
        for mode in (list(MODES) if b % 2 == 0 else list(reversed(MODES))):
            got[mode] += fn(mode)
    return {m: percentiles(v) for m, v in got.items()}


def measure_path(path: Driver, writer_counts: list[int], seconds: float, blocks: int, block_s: float,
                 texts: Texts) -> dict[str, Any]:
    for mode in MODES:  # warm: the model, each store's index, the server's first calls
        path.run(mode, 1, min(0.5, block_s), True, texts)
    out: dict[str, Any] = {}
    with stage(f"{path.name}: idle recall and a lone writer, {blocks} alternating blocks"):
        queries = max(5, int(block_s * 10))
        out["idle_recall"] = alternating(
            path, lambda m: path.run(m, 0, 0, True, texts, queries=queries)["recalls"], blocks)
        out["lone_add"] = alternating(path, lambda m: path.run(m, 1, block_s, False, texts)["adds"], blocks)
    out["fleet"] = {m: {} for m in MODES}
    for n in writer_counts:
        for mode in MODES:
            with stage(f"{path.name}: {n} writers + 1 recaller, group commit {mode}, {seconds:g} s"):
                before = path.batches(mode)
                run = path.run(mode, n, seconds, True, texts)
                after = path.batches(mode)
            row: dict[str, Any] = {"rows_per_s": round(len(run["adds"]) / run["elapsed_s"], 1),
                                   "add": percentiles(run["adds"]), "recall": percentiles(run["recalls"])}
            if before is not None and after is not None and after["batches"] > before["batches"]:
                row["mean_batch"] = round((after["rows"] - before["rows"]) / (after["batches"] - before["batches"]), 2)
            out["fleet"][mode][n] = row
            print(f"  {row['rows_per_s']} rows/s, add p50/p95 {row['add']['p50_ms']}/{row['add']['p95_ms']} ms, "
                  f"recall p50/p95 {row['recall']['p50_ms']}/{row['recall']['p95_ms']} ms"
                  + (f", {row['mean_batch']} adds a batch" if "mean_batch" in row else ""), flush=True)
    return out


@contextmanager
def library_path(stores: dict[str, Path], embedder: Embedder) -> Iterator[LibraryPath]:
    cores = {m: open_library_core(p, embedder, m) for m, p in stores.items()}
    try:
        yield LibraryPath(cores)
    finally:
        for c in cores.values():
            c.close()


@contextmanager
def mcp_path(stores: dict[str, Path], embedder: str, root: Path) -> Iterator[McpPath]:
    token = secrets.token_urlsafe(24)
    config = root / "operator.toml"
    config.write_text(f'[server]\noperator_token_sha256 = "{hash_token(token)}"\n', encoding="utf-8")
    with ExitStack() as servers:
        urls = {m: servers.enter_context(running_http_server(p, config=config, env=settings_env(embedder, m)))
                for m, p in stores.items()}
        yield McpPath(urls, token)


# ---- the run ------------------------------------------------------------------------------------
def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    raw = results["raw_chroma_batch32_rows_per_s"]["best"]
    out = []
    for name, p in results["paths"].items():
        fleet = p["fleet"]["on"]
        if 8 not in fleet:
            continue
        lone = p["lone_add"]
        pairs = [
            ("throughput_8_vs_raw_batch32", fleet[8]["rows_per_s"] / raw, ">="),
            ("add_p95_8_vs_lone_p50", fleet[8]["add"]["p95_ms"] / lone["on"]["p50_ms"], "<="),
            ("recall_p95_8_vs_idle_p50", fleet[8]["recall"]["p95_ms"] / p["idle_recall"]["on"]["p50_ms"], "<="),
            ("lone_add_p50_on_vs_off", lone["on"]["p50_ms"] / lone["off"]["p50_ms"], "<="),
        ]
        for goal, ratio, sense in pairs:
            target = GOALS[goal]
            met = ratio >= target if sense == ">=" else ratio <= target
            out.append({"path": name, "goal": goal, "ratio": round(ratio, 3), "target": f"{sense} {target}",
                        "met": met})
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", default="1,4,8,32", help="concurrent writer counts")
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each fleet phase")
    parser.add_argument("--paths", default="mcp,library", help="mcp (the HTTP server), library, or both")
    parser.add_argument("--preload", type=int, default=500, help="turns in each store before the run")
    parser.add_argument("--blocks", type=int, default=4, help="alternating blocks for the idle/lone figures")
    parser.add_argument("--block-seconds", type=float, default=2.0, help="length of each such block")
    parser.add_argument("--raw-rows", type=int, default=256, help="rows of each raw Chroma round")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    writer_counts = [int(n) for n in args.writers.split(",")]
    embedder = embedder_of(args.embedder)
    embedder.embed(["warm up the model"])
    texts = Texts(10_000_000)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "loadavg_1m_start": round(os.getloadavg()[0], 2)},
        "embedder": embedder.name, "seconds": args.seconds, "preload": args.preload, "paths": {},
    }
    raw: list[float] = []
    with tempfile.TemporaryDirectory(prefix="mc-fleet-") as tmp:
        root = Path(tmp)

        def raw_round() -> None:
            with stage(f"raw Chroma add, batches of 32, {args.raw_rows} rows"):
                rows = [texts() for _ in range(args.raw_rows)]
                raw.append(raw_chroma_batch32(embedder, rows, root / f"raw{len(raw)}"))
                print(f"  {raw[-1]:.1f} rows/s", flush=True)

        with stage(f"preload {args.preload} turns"):
            preload(root / "seed", embedder, args.preload, texts)
        raw_round()
        for name in args.paths.split(","):
            stores = {m: root / f"{name}-{m}" for m in MODES}
            for p in stores.values():
                shutil.copytree(root / "seed", p)
            opened = mcp_path(stores, args.embedder, root) if name == "mcp" else library_path(stores, embedder)
            with opened as path:
                results["paths"][name] = measure_path(path, writer_counts, args.seconds, args.blocks,
                                                       args.block_seconds, texts)
            raw_round()
    results["raw_chroma_batch32_rows_per_s"] = {"rounds": [round(r, 1) for r in raw], "best": round(max(raw), 1)}
    results["machine"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    results["goals"] = goals(results)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


def report(results: dict[str, Any]) -> None:
    raw = results["raw_chroma_batch32_rows_per_s"]["best"]
    for name, p in results["paths"].items():
        rows = []
        for n in sorted({n for m in MODES for n in p["fleet"][m]}):
            for mode in MODES:
                r = p["fleet"][mode].get(n)
                if r is not None:
                    rows.append([n, mode, r["rows_per_s"], round(r["rows_per_s"] / raw, 2), r["add"]["p50_ms"],
                                 r["add"]["p95_ms"], r["recall"]["p50_ms"], r["recall"]["p95_ms"],
                                 r.get("mean_batch", "-")])
        print_table(f"{name}: writers adding one turn a call + 1 recaller (raw Chroma batch-32: {raw} rows/s)",
                    ["writers", "group commit", "rows/s", "x raw", "add p50 ms", "add p95 ms", "recall p50 ms",
                     "recall p95 ms", "adds a batch"], rows)
        print(f"  idle recall p50: on {p['idle_recall']['on']['p50_ms']} / off {p['idle_recall']['off']['p50_ms']} ms;"
              f" lone add p50: on {p['lone_add']['on']['p50_ms']} / off {p['lone_add']['off']['p50_ms']} ms")
    if results["goals"]:
        print_table("Goals (ratios from this run)", ["path", "goal", "ratio", "target", "met"],
                    [[g["path"], g["goal"], g["ratio"], g["target"], g["met"]] for g in results["goals"]])
    m = results["machine"]
    print(f"\n{m['cpus']} cores; load {m['loadavg_1m_start']} at start, {m['loadavg_1m_end']} at the end")


if __name__ == "__main__":
    main()
