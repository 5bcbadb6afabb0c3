"""The soak runner: writers and recallers over HTTP for a long time, the server SIGKILLed every few minutes.

    python -m bench.soak.run [--backend sqlite|postgres] [--minutes 30] [--writers 32] [--recallers 8]
                             [--tenants 4] [--kill-every 180] [--embedder minilm|hash] [--out DIR] [--figure PNG]

The server is a real ``memory-core serve --http`` on a fixed loopback port (its log in ``--out``); on
PostgreSQL the graph is in a throwaway cluster and the vectors in a ``chroma run``, as replicas keep
them. Every ``--kill-every`` seconds (±50 %) it is SIGKILLed — mid-batch, mid-recall, whatever it was
doing — and started again at once; the agents (:mod:`bench.soak.agents`) retry what got no answer, each
add with its own idempotency key. Every ``--sample-every`` seconds the server's RSS, open descriptors
and the machine's load are sampled from ``/proc``.

At the end the server is stopped and the store is opened with the library: every acknowledged add must
be there exactly once, under its ref, with its content (lost, duplicated, wrong: all 0), and doctor must
find nothing. The report (``soak-<backend>.json``) holds the per-minute throughput and latencies, the
samples and those totals; ``--figure`` draws them (:mod:`bench.soak.figure`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import secrets
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.soak.agents import Ledger, recaller, writer
from testbed.chroma_server import free_port
from testbed.paths import ROOT

READY_TIMEOUT_S = 300.0


@dataclass
class SoakConfig:
    backend: str = "sqlite"
    seconds: float = 1800.0
    writers: int = 32
    recallers: int = 8
    tenants: int = 4
    kill_every_s: float = 180.0
    embedder: str = "minilm"
    sample_every_s: float = 5.0
    out: Path = field(default_factory=lambda: Path("bench/results/soak"))
    seed: int = 51


@dataclass
class Life:
    """One server process: when it started, answered /readyz, and was killed (or stopped)."""

    pid: int
    started: float
    ready: float | None = None
    ended: float | None = None
    killed: bool = False


class SoakServer:
    """``memory-core serve --http`` on one port, killed and started again on it; its /metrics on another."""

    def __init__(self, data_dir: Path, port: int, env: dict[str, str], log: Path) -> None:
        self.data_dir, self.port, self.log = data_dir, port, log
        self.metrics_port = free_port()
        self.env = {**env, "MEMORY_CORE_METRICS_ENABLED": "true", "MEMORY_CORE_METRICS_PORT": str(self.metrics_port)}
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.proc: subprocess.Popen[bytes] | None = None
        self.lives: list[Life] = []
        self.scrapes: list[dict[str, float]] = []  # each life's last /metrics, summed up (see scrape)

    def start(self) -> None:
        args = [sys.executable, "-m", "tools.cli", "serve", "--http", "--host", "127.0.0.1", "--port",
                str(self.port), "--data-dir", str(self.data_dir)]
        with self.log.open("ab") as log:
            log.write(f"\n==== start {time.strftime('%H:%M:%S')} ====\n".encode())
            log.flush()
            self.proc = subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        self.lives.append(Life(self.proc.pid, time.monotonic()))

    def wait_ready(self) -> None:
        """Until /readyz answers 200 (stores open, model loaded): the downtime a kill costs."""
        deadline = time.monotonic() + READY_TIMEOUT_S
        base = self.url.removesuffix("/mcp")
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}); see {self.log}")
            try:
                if httpx.get(f"{base}/readyz", timeout=5).status_code == 200:
                    self.lives[-1].ready = time.monotonic()
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the server was not ready after {READY_TIMEOUT_S:g} s; see {self.log}")

    def scrape(self) -> None:
        """What this life's /metrics say so far: group commit's batches, the writer lock's waits, the calls."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            text = httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10).text
        except httpx.HTTPError:
            return
        wanted = {"memory_core_group_commit_batch_size", "memory_core_group_commit_queue_wait_seconds",
                  "memory_core_writer_lock_wait_seconds", "memory_core_tool_duration_seconds"}
        found: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            if family.name not in wanted:
                continue
            for sample in family.samples:
                if sample.name.endswith(("_sum", "_count")):
                    key = sample.name + "".join(f":{v}" for v in sample.labels.values())
                    found[key] = found.get(key, 0.0) + sample.value
        self.scrapes.append(found)

    def kill(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.lives[-1].ended, self.lives[-1].killed = time.monotonic(), True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.lives[-1].ended = time.monotonic()

    def sample(self) -> tuple[float, int] | None:
        """(RSS MB, open descriptors) of the running server, from /proc."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
            rss_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
            fds = len(os.listdir(f"/proc/{self.proc.pid}/fd"))
        except (OSError, StopIteration):
            return None
        return rss_kb / 1024, fds


@contextmanager
def backend_settings(config: SoakConfig, root: Path) -> Iterator[dict[str, Any]]:
    """The settings the server and the final check share: SQLite in the data directory, or PostgreSQL and
    a ``chroma run`` started here."""
    embedding = {"provider": config.embedder}
    if config.backend == "sqlite":
        yield {"embedding": embedding}
        return
    from testbed.chroma_server import running_chroma
    from testbed.postgres import fresh_database, running_postgres

    with running_postgres() as pg, running_chroma(root / "chroma-server") as (host, port):
        yield {"embedding": embedding, "storage": {"graph": "postgres", "postgres_dsn": fresh_database(pg.dsn()),
                                                   "chroma": "http", "chroma_host": host, "chroma_port": port}}


def _env(settings: dict[str, Any]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    for section, values in settings.items():
        for key, value in values.items():
            env[f"MEMORY_CORE_{section}_{key}".upper()] = str(value)
    return env


async def _drive(config: SoakConfig, server: SoakServer, run: str, tenants: list[str], ledger: Ledger,
                 samples: list[dict[str, float]], t0: float) -> None:
    stop = asyncio.Event()
    rng = random.Random(config.seed)
    agents = [asyncio.create_task(writer(server.url, run, tenants[i % len(tenants)], i, ledger, stop))
              for i in range(config.writers)]
    agents += [asyncio.create_task(recaller(server.url, run, tenants, i, ledger, stop))
               for i in range(config.recallers)]
    end = t0 + config.seconds

    async def sampler() -> None:
        while time.monotonic() < end:
            found = server.sample()
            if found is not None:
                samples.append({"t": round(time.monotonic() - t0, 1), "life": len(server.lives) - 1,
                                "rss_mb": round(found[0], 1), "fds": found[1], "load": os.getloadavg()[0]})
            await asyncio.sleep(config.sample_every_s)

    async def killer() -> None:
        while True:
            wait = config.kill_every_s * rng.uniform(0.5, 1.5)
            if time.monotonic() + wait > end - 20:  # no kill in the last 20 s: the end checks a quiet store
                return
            await asyncio.sleep(wait)
            await asyncio.to_thread(server.scrape)  # this life's counts, a moment before it ends
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.start)
            await asyncio.to_thread(server.wait_ready)

    helpers = [asyncio.create_task(sampler()), asyncio.create_task(killer())]
    await asyncio.sleep(max(0.0, end - time.monotonic()))
    await asyncio.to_thread(server.scrape)
    stop.set()
    await asyncio.wait(agents, timeout=120)
    for task in [*agents, *helpers]:
        task.cancel()
    await asyncio.gather(*agents, *helpers, return_exceptions=True)


def _verify(config: SoakConfig, data_dir: Path, settings: dict[str, Any], tenants: list[str],
            ledger: Ledger) -> dict[str, Any]:
    """Open the store with the library: every acknowledged add once, with its ref and content; doctor clean."""
    from memory_core import MemoryCore
    from memory_core.embedding.local import HashEmbedder
    from memory_core.operator.doctor.run import check
    from memory_core.operator.transfer import export_tenant
    from memory_core.settings import load_settings

    embedder = HashEmbedder() if config.embedder == "hash" else None
    opened = MemoryCore.open(data_dir, settings=load_settings(environ={}, overrides=settings),
                             **({"embedder": embedder} if embedder is not None else {}))
    with opened as core:
        parts = core.operator_parts()
        recovered = len(parts.recovered)
        lines = [line for tenant in tenants for line in export_tenant(parts, tenant)]
        doctor = check(parts)
    by_key: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_key.setdefault(str(line.get("idempotency_key")), []).append(line)
    contents = Counter(str(line["content"]) for line in lines)
    acked = {a.key: a for a in ledger.acks}
    lost = [a.key for a in ledger.acks if a.key not in by_key]
    wrong = [a.key for a in ledger.acks if a.key in by_key and any(
        (line["ref"], line["content"], line["tenant"]) != (a.ref, a.content, a.tenant) for line in by_key[a.key])]
    duplicated = sum(len(v) - 1 for v in by_key.values()) + sum(n - 1 for n in contents.values() if n > 1)
    return {"acknowledged": len(acked), "acks_recorded": len(ledger.acks), "rows": len(lines),
            "lost": len(lost), "duplicated": duplicated, "wrong": len(wrong),
            "applied_unacknowledged": len(set(by_key) - set(acked)), "recovered_at_final_open": recovered,
            "doctor_findings": len(doctor.findings), "doctor_kinds": sorted({f.kind for f in doctor.findings}),
            "lost_keys": lost[:20], "wrong_keys": wrong[:20]}


def _pcts(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    ordered = sorted(values)
    return round(statistics.median(ordered), 1), round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1)


def per_minute(ledger: Ledger, samples: list[dict[str, float]], lives: list[Life], t0: float,
               seconds: float) -> list[dict[str, Any]]:
    minutes = int(seconds // 60) + (1 if seconds % 60 else 0)
    rows = []
    for m in range(minutes):
        lo, hi = t0 + 60 * m, t0 + 60 * (m + 1)
        span = min(hi, t0 + seconds) - lo
        adds = [a.ms for a in ledger.acks if lo <= a.at < hi]
        recalls = [ms for at, ms in ledger.recalls if lo <= at < hi]
        here = [s for s in samples if 60 * m <= s["t"] < 60 * (m + 1)]
        add_p50, add_p95 = _pcts(adds)
        rec_p50, rec_p95 = _pcts(recalls)
        rows.append({"minute": m + 1, "adds": len(adds), "adds_per_s": round(len(adds) / span, 1),
                     "add_p50_ms": add_p50, "add_p95_ms": add_p95, "recalls": len(recalls),
                     "recalls_per_s": round(len(recalls) / span, 1), "recall_p50_ms": rec_p50,
                     "recall_p95_ms": rec_p95,
                     "failed_calls": sum(1 for at, _t, _r in ledger.failed_calls if lo <= at < hi),
                     "kills": sum(1 for life in lives if life.killed and life.ended and lo <= life.ended < hi),
                     "rss_mb": max((s["rss_mb"] for s in here), default=None),
                     "fds": max((s["fds"] for s in here), default=None),
                     "load": round(max((s["load"] for s in here), default=0.0), 2)})
    return rows


def flatness(samples: list[dict[str, float]], lives: list[Life], t0: float,
             settle_s: float = 15.0) -> dict[str, Any]:
    """Per server life, after it settled: descriptors and RSS in its first and last thirds (growth within a
    life is what a leak looks like; each life starts over)."""
    out = []
    for index, life in enumerate(lives):
        start = (life.ready or life.started) - t0 + settle_s
        end = (life.ended or float("inf")) - t0
        here = [s for s in samples if s["life"] == index and start <= s["t"] <= end]
        if len(here) < 6:
            continue
        third = len(here) // 3
        first, last = here[:third], here[-third:]
        out.append({"life": index, "seconds": round(here[-1]["t"] - here[0]["t"]),
                    "fds_first": max(s["fds"] for s in first), "fds_last": max(s["fds"] for s in last),
                    "rss_first_mb": round(statistics.median(s["rss_mb"] for s in first), 1),
                    "rss_last_mb": round(statistics.median(s["rss_mb"] for s in last), 1)})
    return {"lives": out,
            "fd_growth_max": max((x["fds_last"] - x["fds_first"] for x in out), default=0),
            "rss_growth_max_mb": round(max((x["rss_last_mb"] - x["rss_first_mb"] for x in out), default=0.0), 1),
            "fds_max": max((s["fds"] for s in samples), default=0),
            "rss_max_mb": max((s["rss_mb"] for s in samples), default=0.0)}


def from_metrics(scrapes: list[dict[str, float]]) -> dict[str, float | None]:
    """Means over the run, from each life's /metrics: adds a batch, queue and writer-lock waits, call times."""
    total: Counter[str] = Counter()
    for scrape in scrapes:
        total.update(scrape)

    def mean(name: str, scale: float = 1.0, label: str = "") -> float | None:
        n = total.get(f"{name}_count{label}", 0.0)
        return round(total[f"{name}_sum{label}"] / n * scale, 2) if n else None

    return {"adds_a_batch": mean("memory_core_group_commit_batch_size"),
            "queue_wait_ms": mean("memory_core_group_commit_queue_wait_seconds", 1000),
            "writer_lock_wait_ms": mean("memory_core_writer_lock_wait_seconds", 1000),
            "add_ms_server": mean("memory_core_tool_duration_seconds", 1000, ":add_memory"),
            "recall_ms_server": mean("memory_core_tool_duration_seconds", 1000, ":recall")}


def run_soak(config: SoakConfig) -> dict[str, Any]:
    """Run one soak and return its report (also written to ``config.out/soak-<backend>.json``)."""
    config.out.mkdir(parents=True, exist_ok=True)
    run = secrets.token_hex(3)
    tenants = [f"soak-{i}" for i in range(config.tenants)]
    with ExitStack() as stack:
        root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="mc-soak-")))
        settings = stack.enter_context(backend_settings(config, root))
        data_dir = root / "data"
        server = SoakServer(data_dir, free_port(), _env(settings), config.out / f"server-{config.backend}.log")
        server.log.write_bytes(b"")
        server.start()
        server.wait_ready()
        ledger, samples = Ledger(), []
        t0 = time.monotonic()
        started_at = time.strftime("%Y-%m-%d %H:%M:%S")
        load_start = os.getloadavg()
        asyncio.run(_drive(config, server, run, tenants, ledger, samples, t0))
        elapsed = time.monotonic() - t0
        server.stop()
        totals = _verify(config, data_dir, settings, tenants, ledger)
    failures = Counter(reason for _at, _tool, reason in ledger.failed_calls)
    downtimes = [round(b.ready - a.ended, 1) for a, b in zip(server.lives, server.lives[1:], strict=False)
                 if a.killed and a.ended and b.ready]
    report = {
        "config": {**asdict(config), "out": str(config.out)},
        "machine": {"cores": os.cpu_count(), "load_at_start": [round(x, 2) for x in load_start],
                    "load_at_end": [round(x, 2) for x in os.getloadavg()], "started_at": started_at},
        "seconds": round(elapsed, 1),
        "totals": {**totals, "kills": sum(1 for life in server.lives if life.killed),
                   "downtime_s": downtimes, "recalls": len(ledger.recalls),
                   "replayed_by_key": sum(1 for a in ledger.acks if a.replayed),
                   "failed_calls": dict(failures), "tool_errors": dict(ledger.errors),
                   "foreign_rows": ledger.foreign_rows, "duplicate_reports": ledger.duplicate_reports,
                   "pending_at_end": ledger.pending,
                   "adds_per_s": round(len(ledger.acks) / elapsed, 1),
                   "recalls_per_s": round(len(ledger.recalls) / elapsed, 1)},
        "minutes": per_minute(ledger, samples, server.lives, t0, config.seconds),
        "flatness": flatness(samples, server.lives, t0),
        "server_metrics": from_metrics(server.scrapes),
        "kills_at_s": [round(life.ended - t0, 1) for life in server.lives if life.killed and life.ended],
        "samples": samples,
    }
    (config.out / f"soak-{config.backend}.json").write_text(json.dumps(report, indent=1), encoding="utf-8")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0],
                                     formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--writers", type=int, default=32)
    parser.add_argument("--recallers", type=int, default=8)
    parser.add_argument("--tenants", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=180.0, help="mean seconds between SIGKILLs (±50%%)")
    parser.add_argument("--embedder", choices=("minilm", "hash"), default="minilm")
    parser.add_argument("--sample-every", type=float, default=5.0)
    parser.add_argument("--out", type=Path, default=Path("bench/results/soak"))
    parser.add_argument("--figure", type=Path, default=None, help="draw the per-minute figure to this PNG")
    args = parser.parse_args(argv)
    config = SoakConfig(backend=args.backend, seconds=args.minutes * 60, writers=args.writers,
                        recallers=args.recallers, tenants=args.tenants, kill_every_s=args.kill_every,
                        embedder=args.embedder, sample_every_s=args.sample_every, out=args.out)
    report = run_soak(config)
    from bench.soak.figure import draw, print_report

    print_report(report)
    if args.figure is not None:
        draw(report, args.figure)
        print(f"figure: {args.figure}")
    t = report["totals"]
    ok = t["lost"] == 0 and t["duplicated"] == 0 and t["wrong"] == 0 and t["doctor_findings"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
