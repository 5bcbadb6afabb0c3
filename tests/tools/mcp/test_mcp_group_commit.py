"""A fleet of agents adding over MCP at once (real server subprocess, real clients over streamable
HTTP): each call keeps its own answer while the server writes them in shared batches."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from testbed.mcp_harness import Caller, error_code, http_client, running_http_server
from tests.support.ui_store import AGENT_TOKEN, OPERATOR_TOKEN, config_text

AGENTS = 8
TURNS = 12


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def gather(calls: list[Callable[[], Awaitable[Any]]]) -> list[Any]:
    out: list[Any] = [None] * len(calls)

    async def run(i: int) -> None:
        out[i] = await calls[i]()

    async with anyio.create_task_group() as tg:
        for i in range(len(calls)):
            tg.start_soon(run, i)
    return out


def batching_line(base: str) -> tuple[int, int]:
    """(rows, batches) from the inspector's Health page."""
    page = httpx.get(f"{base}/ui/health", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}, timeout=30)
    assert page.status_code == 200
    found = re.search(r"([\d,]+) written in ([\d,]+) batches since start", page.text)
    assert found, "the Health page does not say how single adds were batched"
    return int(found.group(1).replace(",", "")), int(found.group(2).replace(",", ""))


@pytest.mark.slow
@pytest.mark.anyio
async def test_agents_adding_at_once_over_http_each_get_their_own_answer_in_shared_batches(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text(config_text(), encoding="utf-8")
    with running_http_server(tmp_path / "data", config=config) as url:
        async with AsyncExitStack() as stack:
            agents = [Caller(await stack.enter_async_context(http_client(url, AGENT_TOKEN)), "acme", send_tenant=False)
                      for _ in range(AGENTS)]

            async def turns(i: int) -> list[dict[str, Any]]:
                out = []
                for n in range(TURNS):
                    out.append(await agents[i].ok("add_memory", session=f"s{i % 2}", agent=f"agent{i}",
                                                  content=f"agent {i} says turn {n}"))
                return out

            written = await gather([lambda i=i: turns(i) for i in range(AGENTS)])
            # in flight together: two retries of one call (one key), and one caller's bad input
            keyed, bad, other = await gather([
                lambda: agents[0].ok("add_memory", session="s0", agent="agent0", content="keyed", idempotency_key="k"),
                lambda: agents[1].call("add_memory", session="s0", agent="agent1", content="   "),
                lambda: agents[2].ok("add_memory", session="s0", agent="agent0", content="keyed", idempotency_key="k"),
            ])
            refs = [r["ref"] for rows in written for r in rows]
            assert len(set(refs)) == AGENTS * TURNS
            assert all(r["created"] for rows in written for r in rows)
            assert error_code(bad) == "EMPTY_CONTENT"
            assert keyed["ref"] == other["ref"] and sorted([keyed["created"], other["created"]]) == [False, True]
            for start in range(0, len(refs), 20):  # every acknowledged add is readable
                got = await agents[3].ok("get_contents", refs=refs[start:start + 20])
                assert not got.get("missing") and len(got["found"]) == len(refs[start:start + 20])
        rows, batches = batching_line(url.rsplit("/mcp", 1)[0])
        print(f"{rows} adds in {batches} batches")
        assert rows == AGENTS * TURNS + 2
        assert batches < rows, "no two of the concurrent adds were ever written together"
