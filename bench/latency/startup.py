"""Start-up costs a user feels, side by side in one run, against the goals of issue 13.

    python -m bench.latency.startup [--memories 10000] [--repeat 3] [--json PATH] [--baseline DIR]

- ``memory-core --help``;
- ``memory-core stats`` / ``recent`` / ``show`` on a store of ``--memories`` memories;
- a stdio launch until ``tools/list`` is answered (the SDK's real stdio client): the first
  launch (it starts the shared background server), a launch that joins it, and the
  in-process ``serve --exclusive``;
- the first ``add_memory`` and ``recall`` right after ``tools/list`` (the embedder loads in
  the background as soon as the server is up).

The store is loaded through the real write path with synthetic vectors under the MiniLM
identity (so the commands open it with the default configuration); queries and the MCP
calls embed with the real MiniLM. Medians of ``--repeat`` runs; every run is a new process.

``--baseline DIR`` runs every measure for another checkout too (``git archive <commit> | tar -x -C
DIR``), alternating with this one on the same store, so "before" and "now" share one run's load.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from bench.common import SyntheticEmbedder, open_bench_core, print_table, sentence, stage
from memory_core.embedding.local import MiniLMEmbedder
from tools.bridge.locate import is_alive
from tools.server_record import ANNOUNCEMENT, read_announcement

ROOT = Path(__file__).resolve().parents[2]  # the checkout
GOALS = {"help": 0.3, "read command": 1.0, "tools/list": 1.5, "first call": 1.0}


class SyntheticMiniLM(SyntheticEmbedder):
    """Synthetic vectors recorded under MiniLM's identity: the CLI opens the store with its defaults."""

    name = MiniLMEmbedder.name


def cli() -> list[str]:
    script = Path(sys.executable).with_name("memory-core")
    return [str(script)] if script.is_file() else [sys.executable, "-c", "from tools.cli.app import main; main()"]


def env(root: Path, **extra: str) -> dict[str, str]:
    """The environment of a command running ``root``'s code (first on the path)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    path = os.pathsep.join(p for p in (str(root), clean.get("PYTHONPATH", "")) if p)
    return {**clean, "PYTHONPATH": path, "MEMORY_CORE_SERVER_SHARED_IDLE_S": "30", **extra}


def build_store(data_dir: Path, memories: int) -> None:
    core = open_bench_core(data_dir, SyntheticMiniLM())
    try:
        for start in range(0, memories, 1000):
            core.add_memories([
                {"tenant": "bench", "session": f"s{i // 200}", "agent": f"agent{i % 5}", "content": sentence(i),
                 "timestamp": f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(1_700_000_000 + i * 60))}+00:00"}
                for i in range(start, min(memories, start + 1000))
            ])
    finally:
        core.close()


def run_cli(root: Path, *args: str) -> float:
    started = time.perf_counter()
    subprocess.run([*cli(), *args], env=env(root), cwd=root, check=True, capture_output=True, timeout=300)
    return time.perf_counter() - started


def stop_shared(data_dir: Path) -> None:
    """Kill the data directory's background server (if any) and wait until it is gone."""
    found = read_announcement(data_dir)
    if found is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(found.pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while is_alive(found) and time.monotonic() < deadline:
        time.sleep(0.05)
    with contextlib.suppress(FileNotFoundError):
        (data_dir / ANNOUNCEMENT).unlink()


def stdio(root: Path, data_dir: Path, *extra: str) -> StdioServerParameters:
    command = cli()
    return StdioServerParameters(command=command[0], args=[*command[1:], "serve", "--data-dir", str(data_dir), *extra],
                                 env=env(root, MEMORY_CORE_TENANT="bench"), cwd=str(root))


async def launch(root: Path, data_dir: Path, *extra: str, calls: bool = False) -> dict[str, float]:
    """Seconds from spawning the stdio server to tools/list answered (and to the first calls)."""
    out: dict[str, float] = {}
    started = time.perf_counter()
    async with Client(stdio(root, data_dir, *extra)) as client:
        await client.list_tools()
        out["tools/list"] = time.perf_counter() - started
        if calls:
            mark = time.perf_counter()
            added = await client.call_tool("add_memory", {"session": "bench-start", "agent": "a",
                                                          "content": "the first call after start"})
            assert not added.is_error, added.content
            out["first add_memory"] = time.perf_counter() - mark
            mark = time.perf_counter()
            found = await client.call_tool("recall", {"query": "what was the first call after start"})
            assert not found.is_error, found.content
            out["first recall"] = time.perf_counter() - mark
    return out


async def joined_launch(root: Path, data_dir: Path) -> float:
    """A second client joining a server that an open first client keeps running."""
    async with Client(stdio(root, data_dir)) as first:
        await first.list_tools()
        started = time.perf_counter()
        async with Client(stdio(root, data_dir)) as second:
            await second.list_tools()
            return time.perf_counter() - started


def median(samples: list[float]) -> float:
    return round(statistics.median(samples), 3)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--baseline", type=Path, help="another checkout to measure alongside, in the same run")
    args = parser.parse_args(argv)
    roots = {"before": args.baseline.resolve(), "now": ROOT} if args.baseline else {"now": ROOT}
    results: dict[str, dict[str, Any]] = {}
    n = args.repeat

    def record(name: str, goal: str | None, samples: dict[str, list[float]]) -> None:
        results[name] = {"goal_s": GOALS.get(goal) if goal else None, **{
            label: {"median_s": median(runs), "samples_s": [round(s, 3) for s in runs]}
            for label, runs in samples.items()}}

    def each(fn: Callable[[Path], float]) -> dict[str, list[float]]:
        """``n`` samples per code root, the roots alternating."""
        samples: dict[str, list[float]] = {label: [] for label in roots}
        for _ in range(n):
            for label, root in roots.items():
                samples[label].append(fn(root))
        return samples

    def launches(store: Path, *extra: str) -> dict[str, list[dict[str, float]]]:
        out: dict[str, list[dict[str, float]]] = {label: [] for label in roots}
        for _ in range(n):
            for label, root in roots.items():
                stop_shared(store)
                out[label].append(anyio.run(partial(launch, root, store, *extra, calls=True)))
        stop_shared(store)
        return out

    def pick(runs: dict[str, list[dict[str, float]]], key: str) -> dict[str, list[float]]:
        return {label: [r[key] for r in rs] for label, rs in runs.items()}

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        store = Path(tmp) / "store"
        with stage(f"loading {args.memories} memories (synthetic vectors)"):
            build_store(store, args.memories)
        with stage("interpreter and CLI"):
            record("python -c pass (interpreter alone)", None, each(lambda _: _timed([sys.executable, "-c", "pass"])))
            record("memory-core --help", "help", each(lambda root: run_cli(root, "--help")))
        with stage("read commands"):
            d = ["--data-dir", str(store), "--json"]
            record(f"memory-core stats ({args.memories})", "read command",
                   each(lambda root: run_cli(root, "stats", "-t", "bench", *d)))
            record(f"memory-core recent ({args.memories})", "read command",
                   each(lambda root: run_cli(root, "recent", "-t", "bench", "-s", "s3", *d)))
            record(f"memory-core show ({args.memories})", "read command",
                   each(lambda root: run_cli(root, "show", f"mem:{max(1, args.memories // 2)}", "-t", "bench", *d)))
        with stage("stdio launches"):
            first = launches(store)
            record(f"stdio launch -> tools/list, starts the shared server ({args.memories})", "tools/list",
                   pick(first, "tools/list"))
            record("  then first add_memory", "first call", pick(first, "first add_memory"))
            record("  then first recall", "first call", pick(first, "first recall"))
            joined: dict[str, list[float]] = {label: [] for label in roots}
            for _ in range(n):
                for label, root in roots.items():
                    joined[label].append(anyio.run(joined_launch, root, store))
                    stop_shared(store)
            record(f"stdio launch -> tools/list, joins the running server ({args.memories})", "tools/list", joined)
            exclusive = launches(store, "--exclusive")
            record(f"stdio launch -> tools/list, --exclusive in-process ({args.memories})", "tools/list",
                   pick(exclusive, "tools/list"))
            record("  then first add_memory (--exclusive)", "first call", pick(exclusive, "first add_memory"))
            record("  then first recall (--exclusive)", "first call", pick(exclusive, "first recall"))
        stop_shared(store)

    print_table(f"Start-up (median of {n} runs, seconds; load {os.getloadavg()[0]:.1f})",
                ["measure", *(f"{label} s" for label in roots), "goal", "", "runs (" + " | ".join(roots) + ")"],
                [_row(name, r, list(roots)) for name, r in results.items()])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return results


def _row(name: str, result: dict[str, Any], labels: list[str]) -> list[str]:
    goal = result["goal_s"]
    now = result[labels[-1]]["median_s"]
    verdict = "" if goal is None else ("ok" if now <= goal else "OVER")
    runs = " | ".join(" ".join(f"{s:.2f}" for s in result[label]["samples_s"]) for label in labels)
    return [name, *(f"{result[label]['median_s']:.3f}" for label in labels), "" if goal is None else f"<= {goal}",
            verdict, runs]


def _timed(command: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, timeout=60)
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
