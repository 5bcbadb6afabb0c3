"""The stdio bridge's cost per call: sequential calls through ``memory-core serve`` (the bridge) to the
data directory's shared server, timed from the line written to the answer read.

    python -m bench.latency.bridge_calls [--calls 300] [--baseline DIR] [--json PATH]

Every bridge connection first has the server prove that it holds the record's secret (one more
HTTP round trip on the same connection, issue 37 point 12); this shows what that costs next to
a call's own work: ``ping`` (no tool), ``tools/list`` and a ``recall`` on a small store (hash
embedder, so no model load blurs it). Raw JSON-RPC lines on the bridge's stdin and stdout, no SDK.

``--baseline DIR`` runs the same calls for another checkout (``git archive <commit> | tar -x -C
DIR``), alternating rounds with this one, so both share one run's machine load.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO, Any

from bench.latency.startup import ROOT, cli, env, stop_shared

CLIENT = {"name": "bench-bridge-calls", "version": "1"}
ROUNDS = 3


class Bridge:
    """One bridge process of ``root``'s code, on ``data_dir``; ``call`` times one request."""

    def __init__(self, root: Path, data_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [*cli(), "serve", "--data-dir", str(data_dir)], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env(root, MEMORY_CORE_TENANT="bench", MEMORY_CORE_EMBEDDING_PROVIDER="hash"),
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in: IO[bytes] = self.proc.stdin
        self._out: IO[bytes] = self.proc.stdout
        self._id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _send(self, message: dict[str, Any]) -> None:
        self._in.write(json.dumps(message).encode() + b"\n")
        self._in.flush()

    def call(self, method: str, params: dict[str, Any]) -> float:
        self._id += 1
        started = time.perf_counter()
        self._send({"jsonrpc": "2.0", "id": self._id, "method": method, "params": params})
        while True:
            answer = json.loads(self._out.readline())
            if answer.get("id") == self._id:
                assert "error" not in answer and not (answer.get("result") or {}).get("isError"), answer
                return time.perf_counter() - started

    def close(self) -> None:
        self._in.close()
        self.proc.wait(timeout=60)


CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "ping": ("ping", {}),
    "tools/list": ("tools/list", {}),
    "recall": ("tools/call", {"name": "recall", "arguments": {"query": "deploy pipeline", "limit": 5}}),
}


def measure(root: Path, data_dir: Path, calls: int) -> dict[str, list[float]]:
    bridge = Bridge(root, data_dir)
    try:
        for i in range(50):  # a small store, and every lazy load done before timing
            bridge.call("tools/call", {"name": "add_memory", "arguments": {
                "session": "s", "agent": "a", "content": f"step {i} of the deploy pipeline"}})
        for method, params in CALLS.values():
            bridge.call(method, params)
        return {name: [bridge.call(method, params) for _ in range(calls)] for name, (method, params) in CALLS.items()}
    finally:
        bridge.close()
        stop_shared(data_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="sequential calls of each kind per round")
    parser.add_argument("--baseline", type=Path, help="another checkout to measure alongside")
    parser.add_argument("--json", type=Path, help="write the results here")
    args = parser.parse_args()
    roots = {"now": ROOT, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    samples: dict[str, dict[str, list[float]]] = {who: {name: [] for name in CALLS} for who in roots}
    with tempfile.TemporaryDirectory() as tmp:
        for round_no in range(ROUNDS):
            for who, root in roots.items():
                got = measure(root, Path(tmp) / f"{who}-{round_no}", args.calls)
                for name, values in got.items():
                    samples[who][name] += values
    rows = {who: {name: {"median_ms": round(statistics.median(v) * 1000, 2),
                         "p95_ms": round(statistics.quantiles(v, n=20)[18] * 1000, 2)}
                  for name, v in by_call.items()}
            for who, by_call in samples.items()}
    for who, by_call in rows.items():
        for name, row in by_call.items():
            print(f"{who:9} {name:11} median {row['median_ms']:7.2f} ms   p95 {row['p95_ms']:7.2f} ms")
    if args.json:
        args.json.write_text(json.dumps({"calls": args.calls, "rounds": ROUNDS, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
