"""Fleet benchmark: many agents each adding one turn a call at once, with a recaller beside them.

    python -m bench.latency.fleet [--writers 1,4,8,32] [--seconds 15] [--paths mcp,library] [--preload 1000]
                                  [--embedder minilm] [--json PATH]

Everything is measured side by side in one run, on one machine, with the same embedder (the real
default MiniLM model unless ``--embedder hash``) and the same kind of texts, for each path — the
real MCP server over streamable HTTP (a ``memory-core serve --http`` subprocess; the clients run in
this process) and the library (threads of this process):

- idle recall latency, and a lone writer's add latency, in alternating blocks on two stores side by
  side, one with group commit on (the defaults) and one off (``write.batch_max = 1``: every add
  written alone, as before);
- for each writer count N, group commit on and off: N writers adding one turn a call (each its own
  session, agent and connection) and one recaller (a recall every ``--recall-every-ms``, as an
  agent recalling before it acts), for ``--seconds``: rows/s, add p50/p95, recall p50/p95 under
  that load, and the batches the store formed (from its inspector's Health page);
- raw Chroma: ``collection.add`` of batches of 32 texts embedded by the same model, just before and
  just after the phases of each writer count (the machine's load drifts; each ratio uses its own
  neighbours), in a collection already holding as many rows as the store (an embedded Chroma add
  costs more as its collection grows).

Every phase starts from a fresh copy of one preloaded store (``--preload`` turns), so each sees the
same store size. The goals (issue 40), as ratios of figures from this run: 8 writers >= 0.8x raw
Chroma batch-32 rows/s; add p95 at 8 writers <= 4x a lone add's p50; recall p95 at 8 writers <= 3x
its idle p50; a lone add's p50 with group commit within 5 % of the one without.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import secrets
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

from bench.common import open_bench_core, percentiles, print_table, sentence, stage
from memory_core import MemoryCore
from memory_core.embedding.api import Embedder
from memory_core.embedding.local import HashEmbedder, shared_minilm
from memory_core.settings import load_settings
from memory_core.write.group_commit import GroupCommit
from testbed.mcp_harness import http_client, running_http_server
from tools.auth import hash_token

TENANT = "fleet"
MODES: dict[str, dict[str, float]] = {"on": {}, "off": {"batch_max": 1}}  # group commit: defaults / every add alone
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
def raw_seed(path: Path, rows: int, dimension: int) -> None:
    """A raw collection holding as many rows as the stores' tenant does at the start of a phase (synthetic
    vectors: only the index's size matters here), so the baseline's adds pay what a collection that
    size costs (an embedded Chroma add costs more as its collection grows)."""
    import chromadb
    import numpy as np

    client = chromadb.PersistentClient(path=str(path), settings=chromadb.Settings(anonymized_telemetry=False))
    col = client.get_or_create_collection("raw", metadata={"hnsw:space": "cosine"}, embedding_function=None)
    rng = np.random.default_rng(0)
    for i in range(0, rows, 500):
        n = min(500, rows - i)
        vecs = rng.standard_normal((n, dimension)).astype(np.float32)
        col.add(ids=[f"seed{i + j}" for j in range(n)], embeddings=vecs / np.linalg.norm(vecs, axis=1, keepdims=True),
                documents=[sentence(j) for j in range(i, i + n)], metadatas=[{"tenant": TENANT, "session": "s"}] * n)


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
class LibraryStore:
    """The library: writers and the recaller are threads of this process calling one MemoryCore."""

    warm_adds = 0  # adds of the warm-up, one at a time: as many batches of one

    def __init__(self, core: MemoryCore, recall_every_s: float) -> None:
        self.core = core
        self.recall_every_s = recall_every_s

    def batches(self) -> dict[str, float] | None:
        return self.core.write_batching()

    def run(self, writers: int, seconds: float, recaller: bool, texts: Texts,
            queries: int | None = None) -> dict[str, Any]:
        core = self.core
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
                stop.wait(max(0.0, t + self.recall_every_s - time.perf_counter()))

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


class McpStore:
    """The real MCP server over streamable HTTP (a subprocess); the clients run in this process."""

    warm_adds = 0  # adds of the warm-up, one at a time: as many batches of one

    def __init__(self, url: str, operator_token: str, recall_every_s: float) -> None:
        self.url = url
        self.operator_token = operator_token
        self.recall_every_s = recall_every_s

    def batches(self) -> dict[str, float] | None:
        """The store's batch counts, as its inspector's Health page shows them to an operator. Read once a
        phase is over: the page starts a doctor check (seconds under the writer lock) on a fresh store."""
        base = self.url.rsplit("/mcp", 1)[0]
        page = httpx.get(f"{base}/ui/health", headers={"Authorization": f"Bearer {self.operator_token}"}, timeout=60)
        found = re.search(r"([\d,]+) written in ([\d,]+) batches since start", page.text)
        if found is None:
            return None
        rows, batches = (int(found.group(i).replace(",", "")) for i in (1, 2))
        return {"rows": rows, "batches": batches}

    def run(self, writers: int, seconds: float, recaller: bool, texts: Texts,
            queries: int | None = None) -> dict[str, Any]:
        return anyio.run(self._run, writers, seconds, recaller, texts, queries)

    async def _run(self, writers: int, seconds: float, recaller: bool, texts: Texts,
                   queries: int | None) -> dict[str, Any]:
        adds: list[float] = []
        recalls: list[float] = []
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(http_client(self.url, None))
                       for _ in range(writers + recaller)]
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
                    await anyio.sleep(max(0.0, min(t + self.recall_every_s, stop_at) - time.perf_counter()))

            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i in range(writers):
                    tg.start_soon(writer, i)
                if recaller:
                    tg.start_soon(recall)
            return {"elapsed_s": time.perf_counter() - start, "adds": adds, "recalls": recalls}


Store = LibraryStore | McpStore


class Bench:
    """What every phase shares: the seed store (copied fresh for each phase), the embedder, the texts."""

    def __init__(self, root: Path, seed: Path, embedder: Embedder, embedder_name: str, texts: Texts,
                 recall_every_s: float) -> None:
        self.recall_every_s = recall_every_s
        self.root = root
        self.seed = seed
        self.embedder = embedder
        self.embedder_name = embedder_name
        self.texts = texts
        self.token = secrets.token_urlsafe(24)
        self.config = root / "operator.toml"
        self.config.write_text(f'[server]\noperator_token_sha256 = "{hash_token(self.token)}"\n', encoding="utf-8")
        self._copies = itertools.count()

    def fresh(self) -> Path:
        """A copy of the seed store: every phase starts from the same rows."""
        path = self.root / f"store{next(self._copies)}"
        shutil.copytree(self.seed, path)
        return path

    @contextmanager
    def opened(self, path_name: str, mode: str) -> Iterator[Store]:
        """A fresh store on ``path_name`` ("mcp": a server subprocess; "library": a core in this process),
        warmed (the model, the index, the first calls) before anything is timed."""
        where = self.fresh()
        if path_name == "mcp":
            env = settings_env(self.embedder_name, mode)
            with running_http_server(where, config=self.config, env=env) as url:
                store: Store = McpStore(url, self.token, self.recall_every_s)
                store.warm_adds = len(store.run(1, 0.3, True, self.texts)["adds"])
                yield store
        else:
            core = open_library_core(where, self.embedder, mode)
            try:
                store = LibraryStore(core, self.recall_every_s)
                store.warm_adds = len(store.run(1, 0.3, True, self.texts)["adds"])
                yield store
            finally:
                core.close()
        shutil.rmtree(where, ignore_errors=True)


# ---- the measurements of one path -----------------------------------------------------------------
def fleet_row(run: dict[str, Any], warm_adds: int, after: dict[str, float] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"rows_per_s": round(len(run["adds"]) / run["elapsed_s"], 1),
                           "add": percentiles(run["adds"]), "recall": percentiles(run["recalls"])}
    if after is not None and after["batches"] > warm_adds:
        row["mean_batch"] = round((after["rows"] - warm_adds) / (after["batches"] - warm_adds), 2)
    return row


def measure_path(bench: Bench, name: str, writer_counts: list[int], seconds: float, blocks: int,
                 block_s: float, raw: Callable[[], float]) -> dict[str, Any]:
    out: dict[str, Any] = {"raw_rounds": [], "fleet": {m: {} for m in MODES}}
    with stage(f"{name}: idle recall and a lone writer, {blocks} alternating blocks on two stores"), \
            bench.opened(name, "on") as on, bench.opened(name, "off") as off:
        stores = {"on": on, "off": off}
        queries = max(5, int(block_s / bench.recall_every_s))
        got: dict[str, dict[str, list[float]]] = {f: {m: [] for m in MODES} for f in ("idle_recall", "lone_add")}
        for b in range(blocks):
            for mode in (list(MODES) if b % 2 == 0 else list(reversed(MODES))):
                got["idle_recall"][mode] += stores[mode].run(0, 0, True, bench.texts, queries=queries)["recalls"]
                got["lone_add"][mode] += stores[mode].run(1, block_s, False, bench.texts)["adds"]
        for figure, by_mode in got.items():
            out[figure] = {m: percentiles(v) for m, v in by_mode.items()}
    out["raw_rounds"].append(raw())
    for i, n in enumerate(writer_counts):
        for mode in (list(MODES) if i % 2 == 0 else list(reversed(MODES))):
            with bench.opened(name, mode) as store, \
                    stage(f"{name}: {n} writers + 1 recaller, group commit {mode}, {seconds:g} s"):
                run = store.run(n, seconds, True, bench.texts)
                row = fleet_row(run, store.warm_adds, store.batches())
            row["raw_before"] = out["raw_rounds"][-1]
            out["fleet"][mode][n] = row
            print(f"  {row['rows_per_s']} rows/s, add p50/p95 {row['add']['p50_ms']}/{row['add']['p95_ms']} ms, "
                  f"recall p50/p95 {row['recall']['p50_ms']}/{row['recall']['p95_ms']} ms"
                  + (f", {row['mean_batch']} adds a batch" if "mean_batch" in row else ""), flush=True)
        out["raw_rounds"].append(raw())
        for mode in MODES:  # the baseline of a writer count: the raw rounds just before and after its phases
            row = out["fleet"][mode][n]
            row["raw_rows_per_s"] = round((row.pop("raw_before") + out["raw_rounds"][-1]) / 2, 1)
            row["vs_raw"] = round(row["rows_per_s"] / row["raw_rows_per_s"], 3)
    return out


def lone_overhead(root: Path, blocks: int = 10, adds: int = 200) -> dict[str, Any]:
    """What group commit itself adds to a lone add: two stores with in-memory vectors and the hash
    embedder (so neither the model nor Chroma hides a few microseconds), one add at a time, alternating
    blocks; p50 of each block's mean add time."""
    cores = {}
    for mode in MODES:
        settings = load_settings(environ={}, overrides={"write": dict(MODES[mode]), "embedding": {"provider": "hash"}})
        cores[mode] = MemoryCore.open(root / f"lone-{mode}", settings=settings, embedder=HashEmbedder(),
                                      in_memory_vectors=True)
    per_add: dict[str, list[float]] = {m: [] for m in MODES}
    try:
        n = 0
        for b in range(blocks):
            for mode in (list(MODES) if b % 2 == 0 else list(reversed(MODES))):
                start = time.perf_counter()
                for _ in range(adds):
                    cores[mode].add_memory(TENANT, "lone", "agent", sentence(n))
                    n += 1
                per_add[mode].append((time.perf_counter() - start) / adds * 1e6)
    finally:
        for core in cores.values():
            core.close()
    us = {m: round(statistics.median(v), 1) for m, v in per_add.items()}
    return {"us_per_add": us, "ratio_on_vs_off": round(us["on"] / us["off"], 3), "machinery_us": machinery_us()}


def machinery_us(calls: int = 20_000) -> float:
    """The queue, lead and hand-over of :class:`GroupCommit` around a write that does nothing, per lone add
    (minus the same write called directly): what group commit costs a lone caller, without the store."""
    item: Any = object()

    def write(items: list[Any]) -> list[Any]:
        return items  # each caller's "result"

    group = GroupCommit(write, batch_max=32, window_s=0.002)
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            group.add(lambda: item)
        grouped = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(calls):
            write([item])
        timings.append((grouped - (time.perf_counter() - start)) / calls * 1e6)
    return round(statistics.median(timings), 2)


# ---- the run ------------------------------------------------------------------------------------
def goals(results: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for name, p in results["paths"].items():
        fleet = p["fleet"]["on"]
        if 8 not in fleet:
            continue
        lone = p["lone_add"]
        pairs = [
            ("throughput_8_vs_raw_batch32", fleet[8]["vs_raw"], ">="),
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
    parser.add_argument("--preload", type=int, default=1000, help="turns in the store before each phase")
    parser.add_argument("--blocks", type=int, default=6, help="alternating blocks for the idle/lone figures")
    parser.add_argument("--block-seconds", type=float, default=2.0, help="length of each such block")
    parser.add_argument("--raw-rows", type=int, default=256, help="rows of each raw Chroma round")
    parser.add_argument("--recall-every-ms", type=float, default=100.0,
                        help="the recaller starts a recall this often (or as soon as the last one returned)")
    parser.add_argument("--coalesce-ms", type=float, help="write.coalesce_ms of the stores with group commit on")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args(argv)
    writer_counts = [int(n) for n in args.writers.split(",")]
    if args.coalesce_ms is not None:
        MODES["on"] = {"coalesce_ms": args.coalesce_ms}
    embedder = embedder_of(args.embedder)
    embedder.embed(["warm up the model"])
    texts = Texts(10_000_000)
    results: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "loadavg_1m_start": round(os.getloadavg()[0], 2)},
        "embedder": embedder.name, "seconds": args.seconds, "preload": args.preload,
        "recall_every_ms": args.recall_every_ms, "write_on": MODES["on"], "paths": {},
    }
    with tempfile.TemporaryDirectory(prefix="mc-fleet-") as tmp:
        root = Path(tmp)
        with stage(f"preload {args.preload} turns; a raw collection of as many rows"):
            preload(root / "seed", embedder, args.preload, texts)
            raw_seed(root / "raw-seed", args.preload, embedder.dimension)
        rounds = itertools.count()

        def raw() -> float:
            where = root / f"raw{next(rounds)}"
            shutil.copytree(root / "raw-seed", where)
            with stage(f"raw Chroma add, batches of 32, {args.raw_rows} rows"):
                rate = raw_chroma_batch32(embedder, [texts() for _ in range(args.raw_rows)], where)
                print(f"  {rate:.1f} rows/s", flush=True)
            shutil.rmtree(where, ignore_errors=True)
            return round(rate, 1)

        with stage("group commit's own cost on a lone add (in-memory vectors, hash embedder)"):
            results["lone_overhead"] = lone_overhead(root)
        bench = Bench(root, root / "seed", embedder, args.embedder, texts, args.recall_every_ms / 1000)
        for name in args.paths.split(","):
            results["paths"][name] = measure_path(bench, name, writer_counts, args.seconds, args.blocks,
                                                  args.block_seconds, raw)
    results["machine"]["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    results["goals"] = goals(results)
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


def report(results: dict[str, Any]) -> None:
    for name, p in results["paths"].items():
        rows = []
        for n in sorted({n for m in MODES for n in p["fleet"][m]}):
            for mode in MODES:
                r = p["fleet"][mode].get(n)
                if r is not None:
                    rows.append([n, mode, r["rows_per_s"], r["raw_rows_per_s"], r["vs_raw"], r["add"]["p50_ms"],
                                 r["add"]["p95_ms"], r["recall"]["p50_ms"], r["recall"]["p95_ms"],
                                 r.get("mean_batch", "-")])
        print_table(f"{name}: writers adding one turn a call + 1 recaller (raw: Chroma batch-32 adds just before "
                    "and after)", ["writers", "group commit", "rows/s", "raw rows/s", "x raw", "add p50 ms",
                                   "add p95 ms", "recall p50 ms", "recall p95 ms", "adds a batch"], rows)
        print(f"  idle recall p50: on {p['idle_recall']['on']['p50_ms']} / off {p['idle_recall']['off']['p50_ms']} ms;"
              f" lone add p50: on {p['lone_add']['on']['p50_ms']} / off {p['lone_add']['off']['p50_ms']} ms;"
              f" raw rounds {p['raw_rounds']} rows/s")
    if results["goals"]:
        print_table("Goals (ratios from this run)", ["path", "goal", "ratio", "target", "met"],
                    [[g["path"], g["goal"], g["ratio"], g["target"], g["met"]] for g in results["goals"]])
    lo = results["lone_overhead"]
    print(f"\nGroup commit's own cost on a lone add (in-memory vectors, hash embedder): {lo['us_per_add']['on']} us "
          f"on vs {lo['us_per_add']['off']} us off per add ({lo['ratio_on_vs_off']}x); the batching machinery "
          f"alone: {lo['machinery_us']} us a lone add")
    m = results["machine"]
    print(f"\n{m['cpus']} cores; load {m['loadavg_1m_start']} at start, {m['loadavg_1m_end']} at the end")


if __name__ == "__main__":
    main()
