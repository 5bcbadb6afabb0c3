"""Server-side time of every inspector page at 10k and 100k memories (goal: each ≤ 200 ms).

    python -m bench.latency.ui [--sizes 10000,100000] [--reps 15] [--json PATH]

Rows are loaded through the real write path with synthetic vectors (bench.common) into one
tenant of sessions of 200 memories and 5 agents, with two handoffs (a SUPERSEDES chain) in
every tenth session, plus a small second tenant. Each page is requested through the real
app (Starlette's TestClient, operator token) and timed by the app's own ``Server-Timing``
header: routing, the guard, the reads and the rendering, without the client's overhead.
The doctor check behind the Health page runs in the background (started by the first Health
view); the pages are timed after it finished, and its duration is listed apart.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from bench.common import SyntheticEmbedder, print_table, sentence, stage
from memory_core import MemoryCore
from memory_core.operator.inspector import Inspector
from memory_core.settings import load_settings
from tools.auth import hash_token
from tools.ui import standalone_app

TOKEN = "bench-operator-token"
SESSION = 200
AGENTS = 5
GOAL_MS = 200.0
T0 = 1_700_000_000


def _ts(i: int) -> str:
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(T0 + i * 30))}+00:00"


def load(core: MemoryCore, start: int, stop: int) -> None:
    for i in range(start, stop, 1000):
        core.add_memories([
            {"tenant": "bench", "session": f"s{j // SESSION}", "agent": f"agent{j % AGENTS}",
             "type": "turn" if j % 7 else "note", "role": "assistant", "content": sentence(j), "timestamp": _ts(j)}
            for j in range(i, min(stop, i + 1000))
        ])
    for s in range(start // SESSION, stop // SESSION, 10):
        for k in (1, 2):
            core.create_handoff("bench", f"s{s}", "agent0", f"Handoff {k} of s{s}: {sentence(s * 10 + k)}",
                                timestamp=_ts((s + 1) * SESSION - 3 + k))
    if start == 0:
        core.add_memories([{"tenant": "small", "session": "x", "agent": "a", "content": sentence(j),
                            "timestamp": _ts(j)} for j in range(100)])


def _server_ms(response: Any) -> float:
    assert response.status_code == 200, (response.status_code, response.text[:300])
    return float(re.search(r"dur=([\d.]+)", response.headers["server-timing"]).group(1))  # type: ignore[union-attr]


def pages(core: MemoryCore, n: int) -> dict[str, str]:
    """The URL of each page, picked in the middle of the store."""
    mid = f"s{(n // SESSION) // 2 // 10 * 10}"  # a session with a handoff chain
    inspector = Inspector(core.operator_parts())
    cursor = None
    for _ in range(4):  # a page 100 rows deep
        cursor = inspector.timeline("bench", mid, 25, cursor).next_cursor
    handoff = inspector.sessions("bench", 0, 100)
    chain_ref = next(s.latest_handoff for s in handoff.sessions if s.latest_handoff)
    keys = list(core._graph.iter_newest("bench", mid))
    turn_ref = f"mem:{keys[len(keys) // 2][1]}"
    return {
        "tenants": "/ui/",
        "tenant sessions": "/ui/tenant?t=bench",
        "tenant sessions, last page": f"/ui/tenant?t=bench&offset={max(0, n // SESSION - 50)}",
        "session timeline, first page": f"/ui/session?t=bench&s={mid}",
        "session timeline, 100 rows deep": f"/ui/session?t=bench&s={mid}&cursor={cursor}",
        "session, turns only": f"/ui/session?t=bench&s={mid}&only=turns",
        "memory (turn)": f"/ui/memory?t=bench&ref={turn_ref}",
        "memory (handoff, chain)": f"/ui/memory?t=bench&ref={chain_ref}",
        "graph JSON depth 1": f"/ui/api/graph?t=bench&ref={turn_ref}&depth=1",
        "graph JSON depth 2": f"/ui/api/graph?t=bench&ref={turn_ref}&depth=2",
        "graph JSON depth 3": f"/ui/api/graph?t=bench&ref={turn_ref}&depth=3",
        "search (20 rows)": "/ui/search?t=bench&q=deploy+pipeline+rollback+latency&limit=20",
        "search, type filter": "/ui/search?t=bench&q=handoff+release&type=handoff&limit=20",
        "search form (no query)": "/ui/search?t=bench",
        "health": "/ui/health",
    }


def measure(core: MemoryCore, n: int, reps: int) -> dict[str, Any]:
    client = TestClient(standalone_app(core), base_url="http://127.0.0.1:8766",
                        headers={"Authorization": f"Bearer {TOKEN}"})
    urls = pages(core, n)
    samples: dict[str, list[float]] = {name: [] for name in urls}
    for url in urls.values():
        _server_ms(client.get(url))  # warm once (this starts the Health page's background check)
    monitor = client.app.routes[1].app.state.ui.monitor  # type: ignore[attr-defined]
    check = monitor.wait(600)  # time the pages in steady state, not against a running full scan
    for _ in range(reps):  # interleaved: noise hits every page alike
        for name, url in urls.items():
            samples[name].append(_server_ms(client.get(url)))
    out = {name: {"p50_ms": round(statistics.median(s), 1), "p95_ms": round(sorted(s)[math.ceil(len(s) * 0.95) - 1], 1),
                  "max_ms": round(max(s), 1)} for name, s in samples.items()}
    return {"pages": out, "doctor_check_s": round(check.duration_s or 0.0, 2)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--data-dir", type=Path, help="keep the store here and reuse what it already holds")
    args = parser.parse_args(argv)
    sizes = sorted(int(s) for s in args.sizes.split(","))
    settings = load_settings(environ={}, overrides={"server": {"operator_token_sha256": hash_token(TOKEN)}})
    results: dict[int, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="mc-bench-ui-") as tmp:
        where = args.data_dir or Path(tmp) / "data"
        core = MemoryCore.open(where, settings=settings, embedder=SyntheticEmbedder())
        try:
            turns = core._graph.count("bench") - core._graph.count("bench") // (SESSION * 5) * 2
            loaded = turns if turns > 0 else 0  # rows a kept --data-dir already holds (handoffs are extra)
            for n in sizes:
                if n < loaded:
                    raise SystemExit(f"{where} already holds {loaded:,} memories; pass larger --sizes or a new dir")
                if n > loaded:
                    with stage(f"loading {n - loaded:,} memories (synthetic vectors) to reach {n:,}"):
                        load(core, loaded, n)
                        loaded = n
                with stage(f"timing every page at {n:,} memories ({args.reps} requests each)"):
                    results[n] = measure(core, n, args.reps)
        finally:
            core.close()
    names = list(next(iter(results.values()))["pages"])
    header = ["page", *(f"{n:,}: p50 / p95 ms" for n in sizes)]
    rows = [[name, *(f"{results[n]['pages'][name]['p50_ms']} / {results[n]['pages'][name]['p95_ms']}"
                     for n in sizes)] for name in names]
    print_table(f"Inspector pages, server-side time (goal ≤ {GOAL_MS:.0f} ms each)", header, rows)
    worst = {n: max(p["p95_ms"] for p in results[n]["pages"].values()) for n in sizes}
    for n in sizes:
        verdict = "ok" if worst[n] <= GOAL_MS else "OVER GOAL"
        print(f"{n:,} memories: slowest page p95 {worst[n]} ms ({verdict}); background doctor check "
              f"{results[n]['doctor_check_s']} s")
    if args.json:
        args.json.write_text(json.dumps({str(k): v for k, v in results.items()}, indent=2))
    return results


if __name__ == "__main__":
    main()
