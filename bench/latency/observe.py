"""What observability costs a call: metrics, the call's log line and the timed writer lock, on and off.

    python -m bench.latency.observe [--calls 200] [--embedder minilm|hash] [--json PATH]

Measured side by side in one run on this machine:

1. through MCP: two ``memory-core serve --http`` at once, each on its own store, one with everything
   off (the defaults) and one with metrics on and a JSON line per call (``logs.level = "info"``, to a
   file); one client each, and the calls alternate between the two (an ``add_memory``, then a
   ``recall``, on one, then the same on the other), so the machine's noise hits both alike: p50 and
   p95 of each tool on each server, and the ratios on/off;
2. in this process, what the recording itself costs: a call through :class:`Observer` with metrics
   off and on (µs a call), the writer lock as :class:`TimedRLock` against ``threading.RLock`` (ns an
   acquire and release), and one ``Tally.observe``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import percentiles, print_table
from memory_core.observe import Tally, TimedRLock
from memory_core.observe.observer import Observer
from memory_core.settings import load_settings
from testbed.mcp_harness import ROOT, SERVER_COMMAND, _await_url, http_client, server_env
from testbed.processes import stop

TENANT = "bench"


def _server(data_dir: Path, log: Path, embedder: str, observed: bool) -> tuple[subprocess.Popen[str], str]:
    env = {"MEMORY_CORE_EMBEDDING_PROVIDER": embedder}
    if observed:
        env |= {"MEMORY_CORE_METRICS_ENABLED": "true", "MEMORY_CORE_METRICS_PORT": "0",
                "MEMORY_CORE_LOGS_FORMAT": "json", "MEMORY_CORE_LOGS_LEVEL": "info"}
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(data_dir)]
    with log.open("w") as err:
        proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**env), stdout=subprocess.PIPE, stderr=err, text=True)
    return proc, _await_url(proc)


async def _through_mcp(urls: dict[str, str], calls: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {f"{tool} {side}": [] for tool in ("add", "recall") for side in urls}
    async with http_client(urls["off"], None) as off, http_client(urls["on"], None) as on:
        clients = {"off": off, "on": on}
        for side, client in clients.items():  # warm both: the model, Chroma, the first recall's index load
            for i in range(5):
                await client.call_tool("add_memory", {"tenant": TENANT, "session": "warm", "agent": "a",
                                                      "content": f"warm-up {side} {i}"})
                await client.call_tool("recall", {"tenant": TENANT, "query": "warm-up"})
        for i in range(calls):
            order = ("off", "on") if i % 2 == 0 else ("on", "off")
            for side in order:
                client = clients[side]
                started = time.perf_counter()
                result = await client.call_tool("add_memory", {
                    "tenant": TENANT, "session": "s", "agent": "a",
                    "content": f"the deploy of service {i} moved the cache and the billing queue"})
                samples[f"add {side}"].append(time.perf_counter() - started)
                assert not result.is_error, result.content
                started = time.perf_counter()
                result = await client.call_tool("recall", {"tenant": TENANT, "query": f"billing queue of {i}"})
                samples[f"recall {side}"].append(time.perf_counter() - started)
                assert not result.is_error, result.content
    return samples


def _per_call_us(fn: Any, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - started) / n * 1e6


def _in_process(n: int = 20_000) -> dict[str, float]:
    settings_off = load_settings(environ={})
    settings_on = load_settings(environ={}, overrides={"metrics": {"enabled": True, "port": 0}})
    off = Observer.from_settings(settings_off, tools=["recall"], version="bench")
    on = Observer.from_settings(settings_on, tools=["recall"], version="bench")

    def call(observer: Observer) -> None:
        with observer.call("recall", "acme") as record:
            record.stages_ms.update({"read": 0.4, "embed": 9.0, "vector": 12.0, "lexical": 3.0, "rank": 17.0})
            record.stage_op = "recall"

    rlock, timed = threading.RLock(), TimedRLock()

    def plain() -> None:
        with rlock:
            pass

    def timed_lock() -> None:
        with timed:
            pass

    tally = Tally()
    results = {}
    for _round in range(3):  # alternate, keep the best of each: the machine is shared
        for name, fn in (("observer off", lambda: call(off)), ("observer metrics on", lambda: call(on)),
                         ("threading.RLock", plain), ("TimedRLock", timed_lock),
                         ("Tally.observe", lambda: tally.observe(0.003))):
            us = _per_call_us(fn, n)
            results[name] = min(results.get(name, us), us)
    return {k: round(v, 3) for k, v in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="mc-observe-") as tmp:
        root = Path(tmp)
        procs, urls = [], {}
        try:
            for side in ("off", "on"):
                proc, url = _server(root / side, root / f"{side}.log", args.embedder, observed=side == "on")
                procs.append(proc)
                urls[side] = url
            samples = asyncio.run(_through_mcp(urls, args.calls))
        finally:
            for proc in procs:
                stop(proc)
        logged = sum(1 for line in (root / "on.log").read_text().splitlines() if '"tool_call"' in line)
    stats = {k: percentiles(v) for k, v in samples.items()}
    rows = [[k, v["p50_ms"], v["p95_ms"], v["n"]] for k, v in stats.items()]
    print_table(f"through MCP ({args.embedder}; on = metrics + a JSON line per call, {logged} lines logged)",
                ["call", "p50 ms", "p95 ms", "n"], rows)
    ratios = {tool: round(stats[f"{tool} on"]["p50_ms"] / stats[f"{tool} off"]["p50_ms"], 3)
              for tool in ("add", "recall")}
    means = {tool: round(statistics.mean(samples[f"{tool} on"]) / statistics.mean(samples[f"{tool} off"]), 3)
             for tool in ("add", "recall")}
    print(f"on/off p50: {ratios}; on/off mean: {means}")
    micro = _in_process()
    print_table("in process (best of 3 rounds)", ["what", "µs a call"], [[k, v] for k, v in micro.items()])
    if args.json is not None:
        args.json.write_text(json.dumps({"mcp": stats, "ratios_p50": ratios, "ratios_mean": means,
                                         "in_process_us": micro, "embedder": args.embedder}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
