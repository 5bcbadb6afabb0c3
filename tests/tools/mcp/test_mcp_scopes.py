"""Token scopes, every tool against every scope, over every way an agent connects.

Transports: streamable HTTP with bearer tokens (one server, one token per scope), stdio with
``MEMORY_CORE_SCOPE`` (one ``serve --exclusive`` process per scope) and stdio through the data
directory's shared server (one bridge per scope, one background server; the scope travels in
the signed bridge token). Each connection is bound to tenant ``acme`` and agent ``me``; its own
session holds rows written by ``me`` and by ``other``, seeded through the library before any
server starts.

For each (transport, scope): ``tools/list`` names exactly the tools the scope allows (on a read
connection, all marked read-only); then every registered tool is called — the row-changing ones
on ``me``'s row and on ``other``'s — and each call either succeeds or fails with SCOPE_DENIED,
as the scope says, a refused call leaving the session exactly as it was.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_core import MemoryCore
from memory_core.scopes import Scope
from memory_core.settings import load_settings
from testbed.mcp_harness import (
    BASE_ENV,
    ROOT,
    Caller,
    error_code,
    http_client,
    running_http_server,
    stdio_params,
)
from testbed.processes import stop_shared_servers
from tools.auth import hash_token, token_config_line
from tools.registry import SPECS_BY_NAME, TOOL_SPECS, allowed_names

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # real servers over HTTP, stdio and the bridge

TENANT, ME, OTHER = "acme", "me", "other"
CHANGING = ("update_memory", "lock_memory", "unlock_memory", "delete_memory")  # act on one row: mine or theirs
TRANSPORTS = ("http", "stdio", "shared")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@dataclass(frozen=True)
class Seeded:
    """One scope's session: a row of mine and one of theirs for each row-changing tool."""

    session: str
    read_ref: str  # mine, never changed: what the read tools look at
    rows: dict[tuple[str, str], str]  # (tool, "mine" | "theirs") -> ref


def seed(data_dir: Path) -> dict[Scope, Seeded]:
    """Write every scope's session through the library (the servers start afterwards)."""
    settings = load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})
    out: dict[Scope, Seeded] = {}
    with MemoryCore.open(data_dir, settings=settings) as core:
        for scope in Scope:
            session = f"s-{scope}"
            read_ref = core.add_memory(TENANT, session, ME, "the deploy pipeline runs on Fridays").ref
            rows: dict[tuple[str, str], str] = {}
            for tool in CHANGING:
                for whose, author in (("mine", ME), ("theirs", OTHER)):
                    ref = core.add_memory(TENANT, session, author, f"{whose} row for {tool} in {session}").ref
                    if tool == "unlock_memory":
                        core.set_lock_as_operator(TENANT, ref, True)
                    rows[(tool, whose)] = ref
            out[scope] = Seeded(session, read_ref, rows)
    return out


@dataclass
class Transport:
    data_dir: Path
    seeded: dict[Scope, Seeded]
    connect: Callable[[Scope], contextlib.AbstractAsyncContextManager[Client]]


def _bound_env(scope: Scope) -> dict[str, str]:
    return {"MEMORY_CORE_TENANT": TENANT, "MEMORY_CORE_AGENT": ME, "MEMORY_CORE_SCOPE": scope.value}


def _bridged(data_dir: Path, scope: Scope) -> StdioServerParameters:
    """``memory-core serve`` as a desktop client launches it: bridged to the directory's shared server."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-c", "from tools.cli.app import main; main()", "serve", "--data-dir", str(data_dir)],
        env={**BASE_ENV, "MEMORY_CORE_SERVER_SHARED_IDLE_S": "30", **_bound_env(scope)},
        cwd=str(ROOT),
    )


@pytest.fixture(scope="module", params=TRANSPORTS)
def transport(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Transport]:
    kind = str(request.param)
    root = tmp_path_factory.mktemp(f"scopes-{kind}")
    data_dir = root / "data"
    seeded = seed(data_dir)
    if kind == "http":
        tokens = {scope: f"token-{scope}" for scope in Scope}
        config = root / "tokens.toml"
        lines = [token_config_line(hash_token(tokens[s]), TENANT, ME, s) for s in Scope]
        config.write_text("[server.tokens]\n" + "\n".join(lines) + "\n", encoding="utf-8")
        with running_http_server(data_dir, config=config) as url:
            yield Transport(data_dir, seeded, lambda scope: http_client(url, tokens[scope]))
        return
    if kind == "stdio":
        yield Transport(data_dir, seeded, lambda scope: Client(stdio_params(data_dir, **_bound_env(scope))))
        return
    try:
        yield Transport(data_dir, seeded, lambda scope: Client(_bridged(data_dir, scope)))
    finally:
        stop_shared_servers(data_dir)


# ---- what each tool is called with -------------------------------------------------------------
def _arguments(tool: str, seeded: Seeded, ref: str | None) -> dict[str, Any]:
    session = seeded.session
    by_tool: dict[str, dict[str, Any]] = {
        "add_memory": {"session": session, "content": "a new note from me"},
        "recall": {"query": "deploy pipeline"},
        "recall_with_context": {"query": "deploy", "context": [{"role": "user", "content": "pipeline"}]},
        "get_contents": {"refs": [seeded.read_ref]},
        "query_recent_turns": {"session": session},
        "check_memory": {"ref": seeded.read_ref},
        "related": {"entity": seeded.read_ref},
        "create_handoff": {"session": session, "content": "done: seeding; next: the scope checks"},
        "delete_memory": {"ref": ref},
        "update_memory": {"ref": ref, "content": f"corrected {ref}"},
        "lock_memory": {"ref": ref},
        "unlock_memory": {"ref": ref},
        "recover_context": {"session": session},
        "summarize_session": {"session": session},
    }
    return by_tool[tool]


def expected(tool: str, scope: Scope, whose: str | None) -> str | None:
    """None (the call succeeds) or the error code it must fail with."""
    if not scope.allows(SPECS_BY_NAME[tool].scope):
        return "SCOPE_DENIED"
    if whose == "theirs" and not scope.allows(Scope.ADMIN):
        return "SCOPE_DENIED"  # a write scope changes its own rows only
    return None


async def session_state(caller: Caller, session: str) -> list[tuple[Any, ...]]:
    """Everything in the session a change could touch: every version of every row, its text and lock."""
    rows = (await caller.ok("recall", query="", session=session, deep=True, limit=50, full_content=True))["messages"]
    return sorted((r["ref"], r["content"], r.get("locked", False), r.get("superseded", False)) for r in rows)


@pytest.mark.parametrize("scope", list(Scope))
async def test_every_tool_obeys_the_connection_scope(transport: Transport, scope: Scope) -> None:
    seeded = transport.seeded[scope]
    async with transport.connect(scope) as client:
        caller = Caller(client, TENANT, send_tenant=False)
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == [s.name for s in TOOL_SPECS if s.name in allowed_names(scope)]
        if scope is Scope.READ:
            assert all(t.annotations is not None and t.annotations.read_only_hint for t in listed)
        start = await session_state(caller, seeded.session)
        for spec in TOOL_SPECS:
            targets: tuple[str | None, ...] = ("mine", "theirs") if spec.name in CHANGING else (None,)
            for whose in targets:
                ref = seeded.rows[(spec.name, whose)] if whose is not None else None
                want = expected(spec.name, scope, whose)
                before = await session_state(caller, seeded.session) if want else None
                result = await caller.call(spec.name, **_arguments(spec.name, seeded, ref))
                label = f"{spec.name} on {whose or '-'} as {scope}"
                if want is None:
                    assert not result.is_error, (label, result.content)
                    continue
                assert error_code(result) == want, (label, result.content)
                assert await session_state(caller, seeded.session) == before, label
        if scope is Scope.READ:  # nothing at all changed, and recover_context stored no summary
            assert await session_state(caller, seeded.session) == start
            recovered = await caller.ok("recover_context", session=seeded.session)
            assert recovered["summary"]["ref"] is None and "not stored" in recovered["summary"]["summary_error"]
        else:
            assert (await caller.ok("summarize_session", session=seeded.session))["ref"].startswith("ep:")


# ---- an HTTP token that binds no agent: "own" is the agent the call names ---------------------------
@asynccontextmanager
async def unbound_write_token(tmp_path: Path) -> AsyncIterator[tuple[Caller, dict[str, str]]]:
    data_dir = tmp_path / "data"
    settings = load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})
    with MemoryCore.open(data_dir, settings=settings) as core:
        refs = {who: core.add_memory(TENANT, "s", who, f"{who}'s shared note").ref for who in ("ann", "bob", "cy")}
    config = tmp_path / "tokens.toml"
    config.write_text("[server.tokens]\n" + token_config_line(hash_token("t-write"), TENANT) + "\n")
    with running_http_server(data_dir, config=config) as url:
        async with http_client(url, "t-write") as client:
            yield Caller(client, TENANT, send_tenant=False), refs


async def test_a_write_token_without_an_agent_changes_only_rows_of_the_agent_each_call_names(tmp_path: Path) -> None:
    async with unbound_write_token(tmp_path) as (caller, refs):
        # no agent named: the connection owns nothing
        for tool in ("delete_memory", "lock_memory"):
            result = await caller.call(tool, ref=refs["ann"])
            assert error_code(result) == "SCOPE_DENIED"
            assert "name yourself as 'viewer'" in result.content[0].text  # type: ignore[union-attr]
        # naming another author than the row's: refused, the row untouched
        assert error_code(await caller.call("delete_memory", ref=refs["ann"], viewer="bob")) == "SCOPE_DENIED"
        refused = await caller.call("update_memory", ref=refs["ann"], agent="bob", content="bob rewrites ann")
        assert error_code(refused) == "SCOPE_DENIED"
        assert (refused.structured_content or {})["error"]["needed"] == "admin"
        found = await caller.ok("get_contents", refs=[refs["ann"]])
        assert [r["content"] for r in found["found"]] == ["ann's shared note"]
        # naming the row's author: its own row (the declared identity, as for private rows without a binding)
        assert (await caller.ok("lock_memory", ref=refs["bob"], viewer="bob"))["changed"] is True
        assert (await caller.ok("update_memory", ref=refs["cy"], agent="cy", content="cy's fix"))["supersedes"] == \
            refs["cy"]
        assert (await caller.ok("delete_memory", ref=refs["ann"], viewer="ann"))["deleted"] is True


async def test_a_tool_outside_the_scope_is_refused_even_when_named_directly(tmp_path: Path) -> None:
    """A client that calls a tool it was not shown gets SCOPE_DENIED (not UNKNOWN_TOOL), naming both scopes."""
    data_dir = tmp_path / "data"
    async with Client(stdio_params(data_dir, MEMORY_CORE_TENANT=TENANT, MEMORY_CORE_SCOPE="read")) as client:
        result = await client.call_tool("add_memory", {"session": "s", "agent": "a", "content": "sneaky"})
        assert error_code(result) == "SCOPE_DENIED"
        error = (result.structured_content or {})["error"]
        assert (error["scope"], error["needed"], error["tool"]) == ("read", "write", "add_memory")
        assert error_code(await client.call_tool("no_such_tool", {})) == "UNKNOWN_TOOL"
        recent = await client.call_tool("query_recent_turns", {"session": "s"})
        assert not recent.is_error and (recent.structured_content or {})["turns"] == []
