"""The background consolidation schedule in a real server process (``memory-core serve --http``).

With ``consolidation.every_s`` set, near-duplicates a store holds, and one an agent adds over MCP while the
server runs, are merged without anyone calling ``memory-core consolidate``: each merge is a JSON log line,
``/metrics`` counts them, and the server stops cleanly on SIGTERM with the stores agreeing. Off (the
default), nothing merges however long the server runs.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from memory_core import MemoryCore, load_settings
from memory_core.operator.doctor.run import check_stores
from testbed.mcp_harness import ROOT, SERVER_COMMAND, Caller, _await_url, http_client, server_env
from testbed.processes import stop
from tests.support.repair_crash import open_store
from tools.serve.upkeep import start_upkeep

pytestmark = pytest.mark.slow
FACTS = ["the staging database runs on postgres sixteen behind pgbouncer",
         "deploys to production happen on tuesdays after the design review",
         "the billing service retries failed webhooks three times with backoff"]
VARIANTS = ["{}", "{}.", "note: {}"]
APART = ["the api listens on port 5433 in staging", "the api listens on port 5434 in staging"]


def fill(data_dir: Path) -> None:
    with open_store(data_dir) as core:
        for tenant in ("acme", "globex"):
            for fact in FACTS:
                for v, variant in enumerate(VARIANTS):
                    core.add_memory(tenant, f"s{v}", ("ann", "bob", "cid")[v], variant.format(fact), type="note")
            for text in APART:
                core.add_memory(tenant, "s1", "ann", text, type="note")


def current(core: MemoryCore) -> Counter[tuple[str, str]]:
    maint = core.operator_parts().maintenance
    return Counter((t, r.node.type) for t in maint.tenants_present() for r in maint.memory_rows(t)
                   if r.node.valid_to_us is None)


@contextmanager
def server(data_dir: Path, log: Path, **env: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(data_dir)]
    with log.open("w") as err:
        proc = subprocess.Popen(args, cwd=ROOT, env=server_env(MEMORY_CORE_LOGS_FORMAT="json",
                                                               MEMORY_CORE_LOGS_LEVEL="info", **env),
                                stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            yield _await_url(proc), proc
        finally:
            stop(proc)


def events(log: Path, event: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [line for line in lines if line.get("event") == event]


def wait_for(check: Any, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


async def add_and_recall(url: str, text: str) -> tuple[str, int]:
    async with http_client(url, None) as client:
        agent = Caller(client, "acme")
        ref = (await agent.ok("add_memory", session="s9", agent="dee", content=text, type="note"))["ref"]
        found = await agent.ok("recall", query=FACTS[0], limit=20)
        return ref, len(found["messages"])


def merges_counted(port: int) -> float:
    text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    return sum(s.value for family in text_string_to_metric_families(text) for s in family.samples
               if s.name == "memory_core_consolidation_merges_total")


def test_a_server_with_a_schedule_merges_near_duplicates_nobody_asked_it_to_and_stops_cleanly(
        tmp_path: Path) -> None:
    from testbed.chroma_server import free_port

    data_dir, log, port = tmp_path / "data", tmp_path / "stderr.log", free_port()
    fill(data_dir)
    with server(data_dir, log, MEMORY_CORE_CONSOLIDATION_EVERY_S="1", MEMORY_CORE_METRICS_ENABLED="true",
                MEMORY_CORE_METRICS_PORT=str(port)) as (url, proc):
        wait_for(lambda: len(events(log, "consolidation_merge")) >= 2 * len(FACTS))
        ref, _seen = asyncio.run(add_and_recall(url, FACTS[0] + " (confirmed)"))  # an agent's new copy
        wait_for(lambda: any(ref in m["merged"] for m in events(log, "consolidation_merge")))
        merged = events(log, "consolidation_merge")
        assert len(merged) == 2 * len(FACTS) + 1
        wait_for(lambda: merges_counted(port) == len(merged))  # counted when the run ends, after its lines
        assert all(m["tenant"].startswith("h:") and m["canonical"].startswith("mem:") for m in merged)
        runs = events(log, "consolidation_run")
        assert runs and all(r["ok"] for r in runs) and not events(log, "consolidation_failed")
        stop(proc)
        assert proc.returncode in (0, -15), proc.returncode  # SIGTERM: stopped, not killed after the timeout
    text = log.read_text(encoding="utf-8")  # the schedule's lines: ids and counts, no content nor tenant name
    ours = [line for line in text.splitlines() if '"memory_core.operator.schedule"' in line]
    assert len(ours) >= len(merged) and not [line for line in ours if "pgbouncer" in line or "acme" in line]
    with open_store(data_dir) as core:
        assert current(core) == Counter({("acme", "note"): len(FACTS) + len(APART),
                                         ("globex", "note"): len(FACTS) + len(APART)})
        assert check_stores(core.operator_parts()).ok


def test_off_by_default_a_server_merges_nothing(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "stderr.log"
    fill(data_dir)
    with server(data_dir, log) as (url, _proc):
        _ref, seen = asyncio.run(add_and_recall(url, FACTS[0] + " (confirmed)"))
        time.sleep(3)  # three periods of a one-second schedule
        assert seen >= len(VARIANTS) + 1
    assert not events(log, "consolidation_merge") and not events(log, "consolidation_run")
    with open_store(data_dir) as core:
        total = len(FACTS) * len(VARIANTS) + len(APART)
        assert current(core) == Counter({("acme", "note"): total + 1, ("globex", "note"): total})


def test_an_exclusive_stdio_server_runs_the_schedule_too_and_stops_when_its_client_leaves(tmp_path: Path) -> None:
    data_dir, log = tmp_path / "data", tmp_path / "stderr.log"
    fill(data_dir)
    args = [sys.executable, *SERVER_COMMAND, "--exclusive", "--data-dir", str(data_dir)]
    with log.open("w") as err:
        proc = subprocess.Popen(args, cwd=ROOT, env=server_env(MEMORY_CORE_LOGS_FORMAT="json",
                                                               MEMORY_CORE_LOGS_LEVEL="info",
                                                               MEMORY_CORE_CONSOLIDATION_EVERY_S="1"),
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=err, text=True)
        try:
            wait_for(lambda: len(events(log, "consolidation_merge")) >= 2 * len(FACTS))
            assert proc.stdin is not None
            proc.stdin.close()  # the client leaves: the server ends, stopping the schedule
            assert proc.wait(timeout=30) == 0
        finally:
            stop(proc)
    with open_store(data_dir) as core:
        assert sum(current(core).values()) == 2 * (len(FACTS) + len(APART))
        assert check_stores(core.operator_parts()).ok


def test_start_upkeep_builds_no_schedule_when_every_s_is_zero() -> None:
    assert start_upkeep(load_settings(environ={}), None, None) is None  # type: ignore[arg-type]
