"""The handoff ordering rule over the real MCP client (stdio subprocess): recall and
recall_with_context filtered by ``type: "handoff"`` put the newest handoff first and say so
(``order: "newest_first"``); a decision filter keeps the confidence order (issue 37, point 1); newer
handoffs of other work stay out (issue 47, point 1)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client

from testbed.mcp_harness import Caller, stdio_params
from tests.memory_core.recall.test_recall_type_order import GAPS, QUERY, UNRELATED, WRITE_UPS

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    async with Client(stdio_params(tmp_path_factory.mktemp("order"))) as c:
        yield c


async def write_ups(caller: Caller, kind: str) -> list[str]:
    now = datetime.now(UTC)
    refs = []
    for i, (hours, text) in enumerate(zip(GAPS["hours"], WRITE_UPS, strict=True)):
        when = (now - timedelta(hours=hours)).isoformat()
        added = await caller.ok("add_memory", session=f"s{i}", agent="planner", content=f"{kind}: {text}", type=kind,
                                timestamp=when)
        refs.append(added["ref"])
    return refs


@pytest.mark.anyio
async def test_recall_puts_the_newest_handoff_first_and_says_it_orders_by_time(client: Client) -> None:
    acme = Caller(client, "acme-handoffs")
    refs = await write_ups(acme, "handoff")
    recalled = await acme.ok("recall", query=QUERY, type="handoff")
    assert [m["ref"] for m in recalled["messages"]] == list(reversed(refs))
    assert recalled["order"] == "newest_first"
    context = [{"role": "user", "content": "where were we with the billing queue?"}]
    with_context = await acme.ok("recall_with_context", query=QUERY, context=context, type="handoff")
    assert [m["ref"] for m in with_context["messages"]] == list(reversed(refs))
    assert with_context["order"] == "newest_first"
    recovered = await acme.ok("recover_context", session="s2")
    assert recovered["handoff"]["ref"] == refs[2]
    deep = await acme.ok("recall", query=QUERY, type="handoff", deep=True)  # no time: relevance orders
    assert "order" not in deep and deep["messages"][-1]["ref"] == refs[2]


@pytest.mark.anyio
async def test_a_decision_filter_keeps_the_confidence_order_and_says_nothing_about_order(client: Client) -> None:
    acme = Caller(client, "acme-decisions")
    refs = await write_ups(acme, "decision")
    recalled = await acme.ok("recall", query=QUERY, type="decision")
    order = [m["ref"] for m in recalled["messages"]]
    assert order[-1] == refs[2] and set(order) == set(refs)
    assert "order" not in recalled


@pytest.mark.anyio
async def test_newer_handoffs_of_other_work_stay_out_of_a_handoff_search(client: Client) -> None:
    acme = Caller(client, "acme-other-work")
    refs = await write_ups(acme, "handoff")
    for text in UNRELATED:  # newer than every billing handoff; "handoff" is all they share with the query
        await acme.ok("create_handoff", session="misc", agent="planner", content=f"handoff: {text}")
    recalled = await acme.ok("recall", query="handoff for the billing queue migration", type="handoff")
    assert [m["ref"] for m in recalled["messages"]] == list(reversed(refs))
    assert recalled["order"] == "newest_first"
