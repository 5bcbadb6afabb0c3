"""Issue 46 over MCP (the SDK's in-process client against the real server): an ``aws configure``
transcript is stored redacted, a session holding a token is a coded SECRET_REJECTED tool error
naming the field, a secret used as an entity kind is dropped and reported, an entity named after a
token is stored redacted — and nothing the client gets back quotes a secret."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from mcp import Client

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from testbed.mcp_harness import Caller, error_code
from testbed.mcp_in_process import served
from testbed.secrets_corpus import EVASIONS, REALISTIC, Fake

pytestmark = pytest.mark.anyio
F = Fake(4649)
GH = F.github_classic()
GL = "glpat-" + F.chars("abcdefghijklmnopqrstuvwxyz0123456789", 20)  # lower case: fits an entity kind


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings(policy: str) -> Settings:
    return load_settings(environ={}, overrides={"embedding": {"provider": "hash"}, "security": {"secrets": policy}})


@asynccontextmanager
async def caller(data: Path, policy: str = "redact") -> AsyncIterator[Caller]:
    async with Client(served(settings(policy), data)) as client:
        yield Caller(client, "acme")


def stored(data: Path) -> str:
    with MemoryCore.open(data, settings=settings("allow"), embedder=HashEmbedder()) as core:
        rows = [r.as_row() for r in core.operator_parts().maintenance.memory_rows("acme", None)]
        entities = [[e.name, e.kind, e.aliases] for e in core.list_entities("acme")]
        return json.dumps([rows, entities], default=str)


async def test_tool_output_and_disguised_tokens_added_over_mcp_are_stored_redacted(tmp_path: Path) -> None:
    samples = [s for s in REALISTIC + EVASIONS if s.name in (
        "aws configure transcript", "netrc", "docker login -p", "zero-width spaces in a github token",
        "base64 slack token", "cyrillic look-alike in a github token")]
    async with caller(tmp_path / "d") as acme:
        for sample in samples:
            added = await acme.ok("add_memory", session="s1", agent="alice", content=sample.text)
            assert sorted(added["redacted"]) == sorted({k for k, _v in sample.secrets}), sample.name
            row = (await acme.ok("get_contents", refs=[added["ref"]]))["found"][0]
            assert not [v for _k, v in sample.secrets if v in row["content"]], sample.name
    held = stored(tmp_path / "d")
    assert not [(s.name, k) for s in samples for k, v in s.secrets if v in held]


async def test_a_session_holding_a_token_is_a_coded_error_naming_the_field(tmp_path: Path) -> None:
    for policy in ("redact", "reject"):
        async with caller(tmp_path / policy, policy) as acme:
            refused = await acme.call("add_memory", session=GH, agent="alice", content="a clean note")
            assert error_code(refused) == "SECRET_REJECTED"
            error = (refused.structured_content or {})["error"]
            assert error["field"] == "session" and error["kinds"] == {"github-token": 1}
            assert GH not in json.dumps(refused.structured_content) + str(refused.content)
            keyed = await acme.call("add_memory", session="s1", agent="alice", content="a clean note",
                                    idempotency_key=f"password={F.password()}")
            assert error_code(keyed) == "SECRET_REJECTED"
            assert (await acme.ok("recall", query=""))["messages"] == []


async def test_a_secret_entity_kind_is_dropped_and_a_secret_entity_name_redacted_over_mcp(tmp_path: Path) -> None:
    async with caller(tmp_path / "d") as acme:
        added = await acme.ok("add_memory", session="s1", agent="alice", content="the deploy bot pushed",
                              entities=[{"name": "deploy bot", "kind": GL}, {"name": GH, "kind": "token"}])
        assert added["redacted"] == {"github-token": 1, "gitlab-token": 1}
    held = stored(tmp_path / "d")
    assert GH not in held and GL not in held
    assert '["deploy bot", null, ["deploy bot"]]' in held and "[REDACTED:github-token]" in held
    async with caller(tmp_path / "r", "reject") as acme:
        refused = await acme.call("add_memory", session="s1", agent="alice", content="the deploy bot pushed",
                                  entities=[{"name": "deploy bot", "kind": GL}])
        assert error_code(refused) == "SECRET_REJECTED"
        assert GL not in json.dumps(refused.structured_content) + str(refused.content)
