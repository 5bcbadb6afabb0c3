"""A bound agent over the real MCP transports: MEMORY_CORE_AGENT over stdio, agent tokens over HTTP.

A connection bound to an agent can act as no one else (AGENT_MISMATCH), and another agent's
private rows stay out of everything it gets back: idempotency replies, duplicate reports,
deletes, summaries, recovery and counts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from testbed.mcp_harness import Caller, error_code, http_client, running_http_server, stdio_params
from tools.auth import hash_token

SECRET = "alice-secret-zebra"
TOKENS = {"alice-token": ("acme", "alice"), "bob-token": ("acme", "bob"), "acme-token": ("acme", None)}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def text_of(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)


async def write_as_alice(alice: Caller) -> dict[str, str]:
    """Alice's private row (with an idempotency key) and a shared one, written on her bound connection."""
    secret = await alice.ok("add_memory", session="s", content=f"{SECRET} plan", visibility="agent",
                            idempotency_key="shared-key")
    await alice.ok("add_memory", session="s", content="the very same words", visibility="agent")
    shared = await alice.ok("add_memory", session="s", content="the canary deploy is green")
    return {"private": secret["ref"], "shared": shared["ref"]}


async def assert_bob_cannot_reach(bob: Caller, refs: dict[str, str]) -> None:
    """Every leak path of issue 10 §5, from Bob's bound connection."""
    private = refs["private"]
    for tool, args in (("recall", {"query": "plan"}), ("get_contents", {"refs": [private]}),
                       ("check_memory", {"ref": private}), ("query_recent_turns", {"session": "s"}),
                       ("recover_context", {"session": "s"}), ("delete_memory", {"ref": private})):
        assert error_code(await bob.call(tool, viewer="alice", **args)) == "AGENT_MISMATCH", tool
    for tool, args in (("add_memory", {"session": "s", "content": "as alice"}),
                       ("create_handoff", {"session": "s", "content": "as alice"})):
        assert error_code(await bob.call(tool, agent="alice", **args)) == "AGENT_MISMATCH", tool

    assert (await bob.ok("get_contents", refs=[private]))["missing"] == [private]
    assert SECRET not in text_of(await bob.ok("recall", query=f"{SECRET} plan"))
    # the same idempotency key: Bob's content is stored under a ref of its own
    mine = await bob.ok("add_memory", session="s", content="bob's own note", idempotency_key="shared-key")
    assert mine["created"] and mine["ref"] != private
    assert [r["content"] for r in (await bob.ok("get_contents", refs=[mine["ref"]]))["found"]] == ["bob's own note"]
    # the same words: no duplicate report pointing at Alice's row
    same = await bob.ok("add_memory", session="s", content="the very same words")
    assert "duplicate_of" not in same
    # a delete of Alice's private row reads like a delete of a missing one
    assert (await bob.ok("delete_memory", ref=private))["deleted"] is False
    assert (await bob.ok("delete_memory", ref="mem:987654"))["deleted"] is False
    summary = await bob.ok("summarize_session", session="s")
    assert SECRET not in summary["summary"] and private not in text_of(summary)
    assert summary["turn_count"] == 3  # alice's shared row and bob's two
    recovery = await bob.ok("recover_context", session="s")
    assert private not in text_of(recovery) and SECRET not in text_of(recovery)
    check = await bob.ok("check_memory", ref=refs["shared"])
    assert check["neighbours"]["session"]["memories"] == 3 and private not in text_of(check)


async def assert_alice_kept_her_row(alice: Caller, refs: dict[str, str]) -> None:
    found = (await alice.ok("get_contents", refs=[refs["private"]]))["found"]
    assert [(r["ref"], r["agent"]) for r in found] == [(refs["private"], "alice")]
    again = await alice.ok("add_memory", session="s", content=f"{SECRET} plan", visibility="agent",
                           idempotency_key="shared-key")
    assert (again["ref"], again["created"]) == (refs["private"], False)


# ---- stdio: MEMORY_CORE_AGENT --------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.anyio
async def test_memory_core_agent_binds_the_only_author_and_viewer_of_a_stdio_server(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with Client(stdio_params(data, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="alice")) as client:
        alice = Caller(client, "acme", send_tenant=False)
        refs = await write_as_alice(alice)
        shown = await alice.ok("check_memory", ref=refs["private"])
        assert shown["memory"]["agent"] == "alice"  # the omitted author is the bound agent
        assert SECRET in text_of(await alice.ok("recall", query="plan"))  # and so is the omitted viewer
        assert error_code(await alice.call("recall", query="plan", viewer="bob")) == "AGENT_MISMATCH"
    async with Client(stdio_params(data, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="bob")) as client:
        await assert_bob_cannot_reach(Caller(client, "acme", send_tenant=False), refs)
    async with Client(stdio_params(data, MEMORY_CORE_TENANT="acme", MEMORY_CORE_AGENT="alice")) as client:
        await assert_alice_kept_her_row(Caller(client, "acme", send_tenant=False), refs)


# ---- HTTP: agent-bound tokens ----------------------------------------------------------------
def write_agent_tokens(path: Path) -> Path:
    lines = ["[server.tokens]"]
    for token, (tenant, agent) in TOKENS.items():
        entry = f'{{ tenant = "{tenant}", agent = "{agent}" }}' if agent else f'"{tenant}"'
        lines.append(f'"{hash_token(token)}" = {entry}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("mcp-agent-http")
    with running_http_server(root / "data", config=write_agent_tokens(root / "tokens.toml")) as url:
        yield url


@pytest.fixture(scope="module")
async def callers(server_url: str) -> AsyncIterator[dict[str, Caller]]:
    async with (http_client(server_url, "alice-token") as a, http_client(server_url, "bob-token") as b,
                http_client(server_url, "acme-token") as t):
        yield {name: Caller(c, "acme", send_tenant=False) for name, c in (("alice", a), ("bob", b), ("tenant", t))}


@pytest.mark.slow
@pytest.mark.anyio
async def test_an_agent_token_keeps_its_agents_private_rows_from_every_other_agent(
    callers: dict[str, Caller],
) -> None:
    refs = await write_as_alice(callers["alice"])
    await assert_bob_cannot_reach(callers["bob"], refs)
    await assert_alice_kept_her_row(callers["alice"], refs)


@pytest.mark.anyio
async def test_a_tenant_only_token_names_its_author_on_every_write(callers: dict[str, Caller]) -> None:
    tenant = callers["tenant"]
    assert error_code(await tenant.call("add_memory", session="t", content="who wrote me")) == "INVALID_INPUT"
    ref = (await tenant.ok("add_memory", session="t", agent="carol", content="carol wrote me"))["ref"]
    assert (await tenant.ok("check_memory", ref=ref))["memory"]["agent"] == "carol"


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_configured_agent_binds_a_loopback_http_server_without_tokens(tmp_path: Path) -> None:
    binding = {"MEMORY_CORE_TENANT": "acme", "MEMORY_CORE_AGENT": "alice"}
    with running_http_server(tmp_path / "data", env=binding) as url:
        async with http_client(url, None) as client:
            alice = Caller(client, "acme", send_tenant=False)
            ref = (await alice.ok("add_memory", session="s", content="mine", visibility="agent"))["ref"]
            assert (await alice.ok("check_memory", ref=ref))["memory"]["agent"] == "alice"
            assert error_code(await alice.call("get_contents", refs=[ref], viewer="bob")) == "AGENT_MISMATCH"
