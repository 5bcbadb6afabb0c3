"""Load: 8 agents over streamable HTTP, 3 token-bound tenants, for 10 s (60 s in the long run).

The server is a real subprocess on 127.0.0.1 (port 0) with ``[server.tokens]`` binding each
token to its tenant. Agents mix add_memory, recall, query_recent_turns (following their
cursors) and get_contents (refs written by the tenant's other agents, and now and then a
ref or cursor of another tenant, which must read as missing / INVALID_CURSOR). Every
content carries its tenant's marker. Afterwards: 0 errors, 0 cross-tenant rows, and every
acknowledged add is readable, first over HTTP, then through the library after the server
stopped, with both stores in agreement. The CI run uses the hash embedder; the long run
the real MiniLM default.
"""

from __future__ import annotations

import random
import secrets
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from memory_core import MemoryCore
from memory_core.settings import load_settings
from testbed.mcp_harness import http_client, running_http_server, write_token_config
from tests.reliability.harness import (
    LONG,
    HarnessResult,
    contract_problem,
    error_code,
    leaks,
    marker,
    percentile,
    response_text,
)
from tests.support.store_checks import assert_stores_agree

TENANTS = ("acme", "beta", "gamma")
AGENTS = 8
DURATION_S = 60.0 if LONG else 10.0
EMBEDDER = "minilm" if LONG else "hash"
CALL_TIMEOUT_S = 60.0
MIX = {"add_memory": 4, "recall": 3, "query_recent_turns": 2, "get_contents": 2}
FOREIGN_PROBE_RATE = 0.1  # share of get_contents / query_recent_turns calls that try another tenant's handle
WORDS = ("deploy orion vault billing invoice queue retry timeout cache shard replica migration schema index "
         "token budget latency rollout canary incident pager backlog sprint review handoff summary").split()


@dataclass
class LoadStats:
    """What the agents saw, shared by all of them (one event loop, no locking needed)."""

    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[str] = field(default_factory=list)
    leaked: list[str] = field(default_factory=list)
    refused_probes: Counter[str] = field(default_factory=Counter)
    acked: dict[str, dict[str, str]] = field(default_factory=lambda: {t: {} for t in TENANTS})
    cursors: dict[str, list[tuple[str, str]]] = field(default_factory=lambda: {t: [] for t in TENANTS})

    def calls(self) -> int:
        return sum(len(v) for v in self.latencies.values())


@dataclass
class Agent:
    """One agent: a tenant's token, a session of its own (named like other tenants' sessions)."""

    number: int
    tenant: str
    clients: list[Client]  # one per server; calls go round robin (several replicas, or just one)
    stats: LoadStats
    rng: random.Random
    written: int = 0
    sent: int = 0
    cursor: str | None = None
    paged: set[str] = field(default_factory=set)

    @property
    def session(self) -> str:
        return f"load-{self.number // len(TENANTS)}"

    async def call(self, tool: str, arguments: dict[str, Any], *, expect: str | None = None) -> dict[str, Any] | None:
        """One call; records its latency, and any contract break or leak. ``expect``: the error
        code a deliberate probe must get (anything else is an error)."""
        start = time.perf_counter()
        try:
            client = self.clients[self.sent % len(self.clients)]
            self.sent += 1
            with anyio.fail_after(CALL_TIMEOUT_S):
                result = await client.call_tool(tool, arguments)
        except Exception as exc:  # a transport failure is an error of the run, not of the test code
            self.stats.errors.append(f"{tool}: {type(exc).__name__}: {exc}"[:300])
            return None
        self.stats.latencies[tool].append(time.perf_counter() - start)
        problem = contract_problem(result)
        if problem is None and error_code(result) != expect:
            problem = f"expected {expect or 'success'}, got {result.content[0].text[:200]}"  # type: ignore[union-attr]
        if problem is not None:
            self.stats.errors.append(f"{tool}: {problem}")
            return None
        self.stats.leaked += [f"{tool} as {self.tenant}: {m}" for m in leaks(response_text(result), self.tenant)]
        if expect is not None:
            self.stats.refused_probes[f"{tool}:{expect}"] += 1
            return None
        return result.structured_content

    async def add(self) -> None:
        self.written += 1
        words = " ".join(self.rng.choices(WORDS, k=self.rng.randint(4, 30)))
        content = f"{marker(self.tenant)} agent {self.number} note {self.written}: {words}"
        out = await self.call("add_memory", {
            "session": self.session, "agent": f"agent-{self.number}", "content": content,
            "type": self.rng.choice(["turn", "turn", "note", "decision"]), "role": "assistant",
        })
        if out is not None:
            self.stats.acked[self.tenant][out["ref"]] = content

    async def recall(self) -> None:
        query = " ".join(self.rng.choices(WORDS, k=self.rng.randint(1, 4)))
        filters = self.rng.choice([{}, {"session": self.session}, {"type": "note"}, {"agent": f"agent-{self.number}"}])
        out = await self.call("recall", {"query": query, "limit": self.rng.choice([5, 10, 20]), **filters})
        if out is not None:
            self._check_own(out["messages"], "recall")

    async def recent_turns(self) -> None:
        foreign = [t for t in TENANTS if t != self.tenant and self.stats.cursors[t]]
        if foreign and self.rng.random() < FOREIGN_PROBE_RATE:
            session, cursor = self.rng.choice(self.stats.cursors[self.rng.choice(foreign)])
            await self.call("query_recent_turns", {"session": session, "cursor": cursor}, expect="INVALID_CURSOR")
            return
        if self.cursor is None:
            self.paged.clear()
        arguments: dict[str, Any] = {"session": self.session, "limit": self.rng.choice([5, 20, 50])}
        if self.cursor is not None:
            arguments["cursor"] = self.cursor
        out = await self.call("query_recent_turns", arguments)
        if out is None:
            self.cursor = None
            return
        refs = [turn["ref"] for turn in out["turns"]]
        repeated = self.paged.intersection(refs)
        if repeated or len(set(refs)) != len(refs):
            self.stats.errors.append(f"query_recent_turns: a page repeated {sorted(repeated)[:5]}")
        self.paged.update(refs)
        self._check_own(out["turns"], "query_recent_turns")
        self.cursor = out["next_cursor"]
        if self.cursor is not None:
            self.stats.cursors[self.tenant].append((self.session, self.cursor))

    async def get_contents(self) -> None:
        own = list(self.stats.acked[self.tenant])
        foreign = [ref for t in TENANTS if t != self.tenant for ref in self.stats.acked[t]]
        if not own:
            return
        refs = self.rng.sample(own, min(len(own), self.rng.randint(1, 20)))
        probes = []
        if foreign and self.rng.random() < FOREIGN_PROBE_RATE:
            probes = self.rng.sample(foreign, min(len(foreign), 3))
            refs = refs[: 20 - len(probes)] + probes
        out = await self.call("get_contents", {"refs": refs})
        if out is None:
            return
        found = {row["ref"]: row["content"] for row in out["found"]}
        own_wanted = [r for r in refs if r not in probes]
        for ref in own_wanted:
            if found.get(ref) != self.stats.acked[self.tenant][ref]:
                self.stats.errors.append(f"get_contents: acknowledged {ref} of {self.tenant} missing or changed")
        leaked = set(found) - set(own_wanted)
        self.stats.leaked += [f"get_contents as {self.tenant}: foreign ref {ref} found" for ref in sorted(leaked)]
        if probes:
            self.stats.refused_probes["get_contents:missing"] += len(set(probes) & set(out["missing"]))

    def _check_own(self, rows: list[dict[str, Any]], tool: str) -> None:
        """Rows named by ref must be ones this tenant acknowledged (or still in flight)."""
        foreign = {ref for t in TENANTS if t != self.tenant for ref in self.stats.acked[t]}
        self.stats.leaked += [f"{tool} as {self.tenant}: {row['ref']}" for row in rows if row.get("ref") in foreign]

    async def run(self, deadline: float) -> None:
        actions: dict[str, Callable[[], Any]] = {
            "add_memory": self.add, "recall": self.recall,
            "query_recent_turns": self.recent_turns, "get_contents": self.get_contents,
        }
        names, weights = list(MIX), list(MIX.values())
        await self.add()
        while time.monotonic() < deadline:
            await actions[self.rng.choices(names, weights)[0]]()


async def drive(urls: list[str], tokens: dict[str, str], stats: LoadStats, seed: int) -> float:
    """Run the agents until the deadline, each spreading its calls over ``urls`` round robin;
    returns the elapsed seconds."""
    by_tenant = {tenant: token for token, tenant in tokens.items()}
    start = time.monotonic()
    deadline = start + DURATION_S

    async def agent(number: int) -> None:
        tenant = TENANTS[number % len(TENANTS)]
        async with AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(http_client(url, by_tenant[tenant])) for url in urls]
            await Agent(number, tenant, clients, stats, random.Random(seed + number)).run(deadline)

    async with anyio.create_task_group() as tg:
        for number in range(AGENTS):
            tg.start_soon(agent, number)
    return time.monotonic() - start


async def read_back_over_http(url: str, tokens: dict[str, str], stats: LoadStats) -> int:
    """Every acknowledged add, fetched by ref through its own tenant's token; returns how many are lost."""
    lost = 0
    for token, tenant in sorted(tokens.items()):
        acked = stats.acked[tenant]
        refs = list(acked)
        async with http_client(url, token) as client:
            for start in range(0, len(refs), 20):
                result = await client.call_tool("get_contents", {"refs": refs[start : start + 20]})
                assert contract_problem(result) is None and not result.is_error, result.content
                found = {row["ref"]: row["content"] for row in result.structured_content["found"]}  # type: ignore[index]
                lost += sum(1 for ref in refs[start : start + 20] if found.get(ref) != acked[ref])
                assert not leaks(response_text(result), tenant)
    return lost


def read_back_through_the_library(data_dir: Path, stats: LoadStats) -> int:
    """After the server stopped: every acknowledged add is there, and nothing else; both stores agree."""
    settings = load_settings(environ={}, overrides={"embedding": {"provider": EMBEDDER}})
    lost = 0
    with MemoryCore.open(data_dir, settings=settings) as core:
        for tenant, acked in stats.acked.items():
            refs = list(acked)
            for start in range(0, len(refs), 400):
                contents = core.get_contents(tenant, refs[start : start + 400])
                found = {row.ref: row.content for row in contents.found}
                lost += sum(1 for ref in refs[start : start + 400] if found.get(ref) != acked[ref])
        assert_stores_agree(core, {tenant: set(acked) for tenant, acked in stats.acked.items()})
    return lost


def test_eight_agents_over_http_lose_nothing_leak_nothing_and_get_no_errors(
    tmp_path: Path, results_row: Callable[[str], HarnessResult]
) -> None:
    row = results_row("load (8 agents, HTTP)")
    seed = random.randrange(1 << 30)
    tokens = {f"token-{tenant}-{secrets.token_hex(8)}": tenant for tenant in TENANTS}
    config = write_token_config(tmp_path / "tokens.toml", tokens)
    stats = LoadStats()
    with running_http_server(tmp_path / "data", config=config,
                             env={"MEMORY_CORE_EMBEDDING_PROVIDER": EMBEDDER}) as url:
        elapsed = anyio.run(drive, [url], tokens, stats, seed)
        lost_over_http = anyio.run(read_back_over_http, url, tokens, stats) if not stats.errors else 0
    lost = read_back_through_the_library(tmp_path / "data", stats) if not stats.errors else 0

    calls = stats.calls()
    acked = sum(len(a) for a in stats.acked.values())
    row.trials, row.steps = 1, calls
    row.errors, row.leaked, row.lost = len(stats.errors), len(stats.leaked), max(lost, lost_over_http)
    per_tool = {
        tool: {"calls": len(lat), "per_s": round(len(lat) / elapsed, 1),
               "p50_ms": round(percentile(lat, 0.5) * 1000, 1), "p95_ms": round(percentile(lat, 0.95) * 1000, 1)}
        for tool, lat in sorted(stats.latencies.items())
    }
    row.details = {"embedder": EMBEDDER, "seconds": round(elapsed, 1), "agents": AGENTS, "tenants": len(TENANTS),
                   "calls": calls, "calls_per_s": round(calls / elapsed, 1), "acknowledged_adds": acked,
                   "refused_foreign_probes": dict(stats.refused_probes), "per_tool": per_tool, "seed": seed}
    latency = ", ".join(f"{tool} {v['p50_ms']:.0f}/{v['p95_ms']:.0f} ms" for tool, v in per_tool.items())
    row.notes = (f"embedder={EMBEDDER}; {calls} calls in {elapsed:.1f} s = {calls / elapsed:.0f}/s; "
                 f"{acked} acknowledged adds; p50/p95: {latency}; "
                 f"foreign refs/cursors refused: {sum(stats.refused_probes.values())}")
    print(row.notes)

    assert stats.errors == [], stats.errors[:20]
    assert stats.leaked == [], stats.leaked[:20]
    assert lost_over_http == 0 and lost == 0
    assert acked > 0 and all(stats.acked.values())
