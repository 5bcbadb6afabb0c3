"""Server memory under concurrent large requests, with the body budget and (nearly) without it.

    python -m bench.latency.body_budget [--clients 40] [--mb 3.8]

Starts ``memory-core serve --http`` twice (hash embedder, fresh data directory):
once with the default ``server.max_inflight_bytes`` (32 MiB) and once with it raised to
1 GB, and sends ``--clients`` concurrent recalls whose ``exclude_contents`` make each body
about ``--mb`` MB. Reports the server's peak RSS (VmHWM) before and after, and how many
requests were answered (200) or told to retry (503), side by side.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from bench.common import print_table

ROOT = Path(__file__).resolve().parents[2]  # the checkout
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _peak_rss_mb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) // 1024
    return -1


def _start(data_dir: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.cli", "serve", "--http", "--port", "0", "--data-dir", str(data_dir)],
        cwd=ROOT, env={**clean, "MEMORY_CORE_EMBEDDING_PROVIDER": "hash", **env},
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stderr is not None
    for line in proc.stderr:
        if "listening on " in line:
            return proc, line.rsplit("listening on ", 1)[1].strip()
    raise RuntimeError("the server did not start")


def _session(http: httpx.Client, url: str) -> str:
    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    session = http.post(url, json=init, headers=ACCEPT).headers["mcp-session-id"]
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"},
              headers={**ACCEPT, "mcp-session-id": session})  # fmt: skip
    return session


def run(env: dict[str, str], clients: int, body_mb: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = _start(Path(tmp) / "data", env)
        try:
            http = httpx.Client(timeout=300, limits=httpx.Limits(max_connections=clients + 5))
            session = _session(http, url)
            before = _peak_rss_mb(proc.pid)
            chunk = 19_000
            body = {"tenant": "acme", "query": "big", "exclude_contents": ["w" * chunk] * int(body_mb * 1e6 / chunk)}

            def one(i: int) -> int:
                call = {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                        "params": {"name": "recall", "arguments": body}}  # fmt: skip
                return http.post(url, json=call, headers={**ACCEPT, "mcp-session-id": session}).status_code

            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                statuses = list(pool.map(one, range(clients)))
            return {"before": before, "after": _peak_rss_mb(proc.pid), "s": round(time.perf_counter() - start, 1),
                    "ok": statuses.count(200), "busy": statuses.count(503)}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--mb", type=float, default=3.8)
    args = parser.parse_args()
    rows = []
    unbounded = {"MEMORY_CORE_SERVER_MAX_INFLIGHT_BYTES": "1000000000"}
    for label, env in (("32 MiB (default)", {}), ("1 GB (effectively off)", unbounded)):
        r = run(env, args.clients, args.mb)
        rows.append([label, r["before"], r["after"], r["after"] - r["before"], r["ok"], r["busy"], r["s"]])
    print_table(f"{args.clients} concurrent recalls of {args.mb} MB bodies",
                ["server.max_inflight_bytes", "peak RSS before MB", "peak RSS after MB", "growth MB", "200", "503",
                 "seconds"], rows)  # fmt: skip


if __name__ == "__main__":
    main()
