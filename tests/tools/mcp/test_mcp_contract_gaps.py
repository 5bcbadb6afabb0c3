"""Contract gaps against the seed design, over the real MCP client (stdio subprocess).

- get_contents accounts for every ref sent, under the caller's exact string, duplicates too;
- recall with project_id='@auto' and no viewer says that no viewer was given;
- add_memory(type='handoff') writes the same graph as create_handoff; type='episode' is refused;
- episodes: source_id skips them unless channel is set too; channel alone admits them.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client

from testbed.mcp_harness import Caller, error_code, stdio_params

AGENTS = {"planner": "proj-x"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    params = stdio_params(tmp_path_factory.mktemp("gaps"), MEMORY_CORE_OPERATING_CONTEXT_AGENTS=json.dumps(AGENTS))
    async with Client(params) as c:
        yield c


@pytest.fixture(scope="module")
def acme(client: Client) -> Caller:
    return Caller(client, "acme")


def _edges(check: dict[str, Any], kind: str) -> list[str]:
    return [e["node"] for e in check["neighbours"]["edges"] if e["kind"] == kind and e["direction"] == "out"]


@pytest.mark.slow
@pytest.mark.anyio
async def test_get_contents_answers_every_ref_sent_under_the_exact_string_duplicates_included(acme: Caller) -> None:
    ref = (await acme.ok("add_memory", session="gc", agent="a", content="accounted for"))["ref"]
    asked = [f" {ref}", ref, ref, "mem:99999999", " junk ", f"{ref} "]
    got = await acme.ok("get_contents", refs=asked)
    assert [row["ref"] for row in got["found"]] == [ref, ref, ref, ref]
    answered = [row.get("requested", row["ref"]) for row in got["found"]] + got["missing"]
    assert sorted(answered) == sorted(asked)
    assert [row.get("requested") for row in got["found"]] == [f" {ref}", None, None, f"{ref} "]
    assert got["missing"] == ["mem:99999999", " junk "]


@pytest.mark.slow
@pytest.mark.anyio
async def test_auto_project_without_a_viewer_says_no_viewer_was_given(acme: Caller) -> None:
    nobody = await acme.ok("recall", query="anything", project_id="@auto")
    assert nobody["resolved_project_id"] == ""
    assert "No viewer was given" in nobody["warning"]
    assert "None" not in nobody["warning"]
    stranger = await acme.ok("recall", query="anything", project_id="@auto", viewer="stranger")
    assert "Agent 'stranger' has no default project" in stranger["warning"]
    planner = await acme.ok("recall", query="anything", project_id="@auto", viewer="planner")
    assert planner["resolved_project_id"] == "proj-x" and "warning" not in planner


@pytest.mark.anyio
async def test_add_memory_of_type_handoff_writes_the_same_graph_as_create_handoff(acme: Caller) -> None:
    graphs = []
    for session, write in (("via-add", "add_memory"), ("via-create", "create_handoff")):
        extra = {"type": "handoff"} if write == "add_memory" else {}
        first = (await acme.ok(write, session=session, agent="a", content=f"first handoff {session}", **extra))["ref"]
        second = (await acme.ok(write, session=session, agent="a", content=f"second handoff {session}", **extra))["ref"]
        check = await acme.ok("check_memory", ref=second)
        graphs.append((check["memory"]["type"], check["memory"]["salience"], _edges(check, "SUPERSEDES") == [first]))
    assert graphs[0] == graphs[1] == ("handoff", 0.95, True)
    newest = await acme.ok("recover_context", session="via-add")
    assert newest["handoff"]["content"] == "second handoff via-add"


@pytest.mark.anyio
async def test_add_memory_refuses_type_episode_and_writes_nothing(acme: Caller) -> None:
    result = await acme.call("add_memory", session="no-episode", agent="a", content="pretend summary", type="episode")
    assert error_code(result) == "INVALID_INPUT"
    assert "summarize_session" in result.content[0].text  # type: ignore[union-attr]
    assert (await acme.ok("query_recent_turns", session="no-episode"))["turns"] == []


@pytest.mark.anyio
async def test_source_id_skips_episodes_unless_channel_scopes_them_and_channel_alone_admits_them(
    acme: Caller,
) -> None:
    for i in range(4):
        await acme.ok("add_memory", session="ep-scope", agent="a", channel="discord", source={"id": "discord:42"},
                      content=f"Step {i}: the zeppelin hangar roster moved to thursday mornings.")  # fmt: skip
    episode = (await acme.ok("summarize_session", session="ep-scope"))["ref"]
    query = "zeppelin hangar roster thursday mornings"

    async def episode_found(**filters: Any) -> bool:
        found = await acme.ok("recall", query=query, session="ep-scope", limit=50, **filters)
        return episode in [m["ref"] for m in found["messages"]]

    assert await episode_found()
    assert not await episode_found(source_id="discord:42")
    assert await episode_found(source_id="discord:42", channel="discord")
    assert await episode_found(channel="discord")
    assert not await episode_found(agent="a")
