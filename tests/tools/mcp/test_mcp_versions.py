"""update_memory, lock_memory and unlock_memory through the real MCP client: in process for the
contract, over stdio for a connection bound to an agent (MEMORY_CORE_AGENT)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_core.settings import load_settings
from testbed.mcp_harness import Caller, error_code, stdio_params
from testbed.mcp_in_process import served

pytestmark = pytest.mark.anyio
VERSION_TOOLS = ("update_memory", "lock_memory", "unlock_memory")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ann(tmp_path: Path) -> AsyncIterator[Caller]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    async with Client(served(settings, str(tmp_path / "data"))) as client:
        yield Caller(client, "acme")


async def _fact(caller: Caller, content: str, **extra: Any) -> str:
    added = await caller.ok("add_memory", session="s1", agent="ann", type="fact", content=content, **extra)
    return str(added["ref"])


async def test_update_memory_answers_the_new_ref_and_recall_shows_only_it_marked(ann: Caller) -> None:
    old = await _fact(ann, "The staging database is pg-2")
    new = await ann.ok("update_memory", ref=old, agent="ann", content="The staging database is pg-3")
    assert new["supersedes"] == old and new["ref"] != old and new["created"] is True
    rows = (await ann.ok("recall", query="staging database"))["messages"]
    assert [(r["ref"], r.get("supersedes")) for r in rows] == [(new["ref"], old)]
    deep = (await ann.ok("recall", query="staging database", deep=True))["messages"]
    assert {r["ref"]: r.get("superseded") for r in deep} == {new["ref"]: None, old: True}
    checked = await ann.ok("check_memory", ref=new["ref"])
    assert [v["ref"] for v in checked["neighbours"]["versions"]] == [old, new["ref"]]


async def test_a_stale_update_is_superseded_naming_the_head_and_a_locked_one_is_locked(ann: Caller) -> None:
    old = await _fact(ann, "Release freeze starts Monday")
    new = await ann.ok("update_memory", ref=old, agent="ann", content="Release freeze starts Tuesday")
    stale = await ann.call("update_memory", ref=old, agent="ann", content="Release freeze starts Friday")
    assert error_code(stale) == "SUPERSEDED"
    assert (stale.structured_content or {})["error"]["head"] == new["ref"]
    locked = await ann.ok("lock_memory", ref=new["ref"], viewer="ann")
    assert locked == {"ref": new["ref"], "locked": True, "changed": True}
    assert (await ann.ok("lock_memory", ref=new["ref"], viewer="ann"))["changed"] is False
    for tool, args in (("update_memory", {"agent": "ann", "content": "x"}), ("delete_memory", {"viewer": "ann"})):
        refused = await ann.call(tool, ref=new["ref"], **args)
        assert error_code(refused) == "LOCKED", tool
        assert refused.content[0].text.startswith("LOCKED: ")  # type: ignore[union-attr]
    unlocked = await ann.ok("unlock_memory", ref=new["ref"], viewer="ann")
    assert unlocked == {"ref": new["ref"], "locked": False, "changed": True}
    assert (await ann.ok("delete_memory", ref=new["ref"], viewer="ann"))["deleted"] is True


async def test_arguments_are_checked_strictly_as_their_json_types(ann: Caller) -> None:
    ref = await _fact(ann, "a fact to correct")
    for args in ({"salience": "0.9"}, {"salience": True}, {"content": 42}, {"metadata": "null"}, {"ref": 7},
                 {"salience": 2.0}):
        assert error_code(await ann.call("update_memory", **{"ref": ref, "agent": "ann", **args})) == \
            "INVALID_INPUT", args
    for tool in ("lock_memory", "unlock_memory"):
        assert error_code(await ann.call(tool, ref=["mem:1"])) == "INVALID_INPUT"
    assert error_code(await ann.call("update_memory", ref=ref, content="no author")) == "INVALID_INPUT"
    assert error_code(await ann.call("update_memory", ref=ref, agent="ann")) == "INVALID_INPUT"  # nothing to change
    assert error_code(await ann.call("update_memory", ref="mem:999", agent="ann", content="x")) == "NOT_FOUND"
    assert error_code(await ann.call("lock_memory", ref=ref, tenant="globex")) == "NOT_FOUND"


async def test_the_version_tools_are_listed_tersely_with_the_binding_shaping(ann: Caller) -> None:
    from bench.quality.token_economy import cl100k

    tools = {t.name: t for t in (await ann.client.list_tools()).tools}
    encoding = cl100k()
    descriptions = sum(len(encoding.encode(tools[name].description or "")) for name in VERSION_TOOLS)
    assert descriptions <= 100
    assert tools["update_memory"].input_schema["required"] == ["ref", "agent", "tenant"]
    assert tools["lock_memory"].input_schema["required"] == ["ref", "tenant"]


@pytest.mark.slow
async def test_a_connection_bound_to_an_agent_corrects_only_what_that_agent_may(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Client(stdio_params(data, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="bob")) as client:
        bob = Caller(client, "acme", send_tenant=False)
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "agent" not in listed["update_memory"].input_schema["properties"]
        assert "viewer" not in listed["lock_memory"].input_schema["properties"]
        mine = (await bob.ok("add_memory", session="s", content="bob's private plan", visibility="agent"))["ref"]
        shared = (await bob.ok("add_memory", session="s", content="the shared plan"))["ref"]
        assert error_code(await bob.call("update_memory", ref=shared, agent="ann", content="x")) == "AGENT_MISMATCH"
        assert error_code(await bob.call("lock_memory", ref=shared, viewer="ann")) == "AGENT_MISMATCH"
        new = await bob.ok("update_memory", ref=mine, content="bob's better plan")
        assert new["supersedes"] == mine
        assert (await bob.ok("lock_memory", ref=new["ref"]))["changed"] is True
        assert (await bob.ok("get_contents", refs=[new["ref"]]))["found"][0]["locked"] is True
