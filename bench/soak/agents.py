"""The soak's agents: JSON-RPC clients of the streamable HTTP endpoint, one connection each.

Each call is one ``tools/call`` POST, as the MCP SDKs send it to a stateless server. A writer adds one
turn a call, each with its own idempotency key, and retries that key — after a refused connection, a
reset, a timeout or a store still opening — until it is acknowledged, as an agent whose call failed
should; an add that returned is recorded as acknowledged with its ref and content. A recaller recalls
with words of what was written. Every outcome lands in :class:`Ledger` with its time.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
TRANSIENT = frozenset({"STORE_UNAVAILABLE", "STORE_LOCKED", "SERVER_BUSY", "SERVER_UNAVAILABLE"})
WORDS = ("deploy", "cache", "billing", "replica", "rollback", "latency", "schema", "handoff", "queue", "trace",
         "invoice", "migration", "backup", "feature", "incident", "review", "release", "quota", "index", "token")
RETRY_S = 0.25


@dataclass(frozen=True)
class Ack:
    tenant: str
    key: str
    ref: str
    content: str
    at: float  # time.monotonic() when acknowledged
    ms: float  # the acknowledged attempt's latency
    e2e_ms: float  # from the first attempt, retries included
    replayed: bool  # the server answered from the idempotency key (the first attempt had been applied)


@dataclass
class Ledger:
    """Everything the agents saw, in order of completion."""

    acks: list[Ack] = field(default_factory=list)
    recalls: list[tuple[float, float]] = field(default_factory=list)  # (monotonic time, latency ms)
    failed_calls: list[tuple[float, str, str]] = field(default_factory=list)  # (time, tool, transport|code)
    errors: Counter[str] = field(default_factory=Counter)  # non-transient tool errors by code
    foreign_rows: int = 0  # a recall row of another tenant (must stay 0)
    duplicate_reports: int = 0  # duplicate_of on a unique content (must stay 0)
    pending: int = 0  # adds never acknowledged (the run ended first)


class CallFailed(Exception):
    """The call got no answer (transport), or an answer worth retrying (a transient code)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _answer(response: httpx.Response) -> dict[str, Any]:
    if response.status_code >= 500 or response.status_code in (408, 429):
        raise CallFailed(f"http {response.status_code}")
    response.raise_for_status()
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = next((d for d in data if '"result"' in d or '"error"' in d), "")
    if not text:
        raise CallFailed("no answer")
    message: dict[str, Any] = json.loads(text)
    return message


async def call(http: httpx.AsyncClient, url: str, tool: str, arguments: dict[str, Any], rid: int) -> dict[str, Any]:
    """One tool call; its result (``structuredContent``) or the error it answered with (``{"error": …}``)."""
    body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    try:
        response = await http.post(url, json=body, headers=ACCEPT)
    except httpx.TransportError as exc:
        raise CallFailed(f"transport: {type(exc).__name__}") from exc
    message = _answer(response)
    if "error" in message:
        raise CallFailed(f"jsonrpc {message['error'].get('code')}")
    result = message["result"]
    payload: dict[str, Any] = result.get("structuredContent") or {}
    if result.get("isError"):
        code = str(payload.get("error", {}).get("code", "TOOL_ERROR"))
        if code in TRANSIENT:
            raise CallFailed(code)
        return {"error": code}
    return payload


def content_for(run: str, tenant: str, writer: int, seq: int, rng: random.Random) -> str:
    """A unique turn of ~200 characters: who wrote it and when, and ten words recallers search for."""
    words = " ".join(rng.choice(WORDS) for _ in range(10))
    return (f"soak {run} tenant {tenant} writer {writer} turn {seq}: the agent noted {words}; "
            f"nothing else in this turn matters beyond its number {seq * 7919 % 100003}.")


async def writer(url: str, run: str, tenant: str, index: int, ledger: Ledger, stop: asyncio.Event) -> None:
    rng = random.Random(f"{run}-{index}")
    seq = 0
    async with httpx.AsyncClient(timeout=60) as http:
        while not stop.is_set():
            seq += 1
            key = f"{run}-w{index}-{seq}"
            content = content_for(run, tenant, index, seq, rng)
            args = {"tenant": tenant, "session": f"writer-{index}", "agent": f"writer-{index}", "type": "turn",
                    "role": "assistant", "content": content, "idempotency_key": key}
            first = time.monotonic()
            while True:
                started = time.monotonic()
                try:
                    result = await call(http, url, "add_memory", args, seq)
                except CallFailed as exc:
                    ledger.failed_calls.append((time.monotonic(), "add_memory", exc.reason))
                    if stop.is_set():
                        ledger.pending += 1
                        return
                    await asyncio.sleep(RETRY_S)
                    continue
                break
            now = time.monotonic()
            if "error" in result:
                ledger.errors[str(result["error"])] += 1
                continue
            if result.get("duplicate_of"):
                ledger.duplicate_reports += 1
            ledger.acks.append(Ack(tenant, key, str(result["ref"]), content, now, (now - started) * 1000,
                                   (now - first) * 1000, not result.get("created", True)))


async def recaller(url: str, run: str, tenants: list[str], index: int, ledger: Ledger, stop: asyncio.Event) -> None:
    rng = random.Random(f"{run}-r{index}")
    n = 0
    async with httpx.AsyncClient(timeout=60) as http:
        while not stop.is_set():
            n += 1
            tenant = rng.choice(tenants)
            query = " ".join(rng.sample(WORDS, 3))
            started = time.monotonic()
            try:
                result = await call(http, url, "recall", {"tenant": tenant, "query": query, "limit": 10}, n)
            except CallFailed as exc:
                ledger.failed_calls.append((time.monotonic(), "recall", exc.reason))
                await asyncio.sleep(RETRY_S)
                continue
            now = time.monotonic()
            if "error" in result:
                ledger.errors[str(result["error"])] += 1
                continue
            ledger.recalls.append((now, (now - started) * 1000))
            marker = f"soak {run} tenant {tenant} "
            ledger.foreign_rows += sum(1 for row in result.get("messages", [])
                                       if not str(row.get("content", "")).startswith(marker))
