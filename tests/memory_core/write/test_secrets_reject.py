"""``security.secrets = "reject"``: a write holding a secret is refused with SECRET_REJECTED on every
write path (library, MCP over stdio, CLI), names the kinds and spans but never the secret, and
writes nothing to either store; ``allow`` stores text as given; the CLI reports redactions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import SecretRejectedError
from memory_core.operator.jsonl_import import import_lines
from memory_core.settings import load_settings
from memory_core.write.rows import content_hash
from testbed.mcp_harness import Caller, error_code, stdio_params
from testbed.secrets_corpus import Fake
from tools.cli.app import app

F = Fake(4242)
GH, AK, PW = F.github_classic(), F.aws_access_key(), F.password()


def open_store(path: Path, policy: str) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "security": {"secrets": policy}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder())


def assert_empty(core: MemoryCore, tenant: str = "acme") -> None:
    assert core._graph.count(tenant) == 0
    assert not [r for r in core._vectors.all_ids(tenant) if r.startswith("mem:")]
    assert core._graph.journal() == []


def test_reject_refuses_every_library_write_path_and_writes_nothing(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", "reject") as core:
        with pytest.raises(SecretRejectedError) as caught:
            core.add_memory("acme", "s1", "alice", f"push with GITHUB_TOKEN={GH}")
        assert caught.value.fields["kinds"] == {"github-token": 1}
        assert GH not in json.dumps(caught.value.to_dict()) + str(caught.value)
        with pytest.raises(SecretRejectedError):
            core.add_memory("acme", "s1", "alice", "clean text", metadata={"db_password": PW})
        with pytest.raises(SecretRejectedError):
            core.create_handoff("acme", "s1", "alice", f"next: rotate {AK}")
        with pytest.raises(SecretRejectedError) as batch:
            core.add_memories([{"tenant": "acme", "session": "s1", "agent": "a", "content": "fine"},
                               {"tenant": "acme", "session": "s1", "agent": "a", "content": f"key {AK}"}])
        assert batch.value.fields["index"] == 1
        assert_empty(core)
        ref = core.add_memory("acme", "s1", "alice", "the deploy target is staging").ref
        with pytest.raises(SecretRejectedError):
            core.update_memory("acme", ref, agent="alice", content=f"the deploy token is {GH}")
        assert [m.ref for m in core.recall("acme", "", limit=10).messages] == [ref]
        assert core.get_contents("acme", [ref]).found[0].content == "the deploy target is staging"


def test_reject_reports_an_imported_line_with_a_secret_and_imports_the_others(tmp_path: Path) -> None:
    def line(n: int, text: str) -> str:
        return json.dumps({"ref": f"mem:{n}", "tenant": "acme", "session": "imp", "agent": "c", "type": "note",
                           "salience": 0.5, "timestamp": f"2026-03-01T10:00:0{n}+00:00", "content": text,
                           "content_hash": content_hash(text)})

    with open_store(tmp_path / "data", "reject") as core:
        counts = import_lines(core.operator_parts(), [line(1, "a clean note"), line(2, f"aws key {AK}")], "acme")
        assert (counts.written, counts.errors) == (1, 1)
        assert counts.error_lines[0]["line"] == 2 and counts.error_lines[0]["code"] == "SECRET_REJECTED"
        assert AK not in json.dumps(counts.to_dict())
        assert core._graph.count("acme") == 1


def test_allow_stores_secrets_as_given(tmp_path: Path) -> None:
    with open_store(tmp_path / "data", "allow") as core:
        result = core.add_memory("acme", "s1", "alice", f"token {GH}")
        assert result.redacted == {} and "redacted" not in result.to_dict()
        assert core.get_contents("acme", [result.ref]).found[0].content == f"token {GH}"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.anyio
async def test_over_mcp_reject_is_a_coded_tool_error_and_redact_reports_the_kinds(tmp_path: Path) -> None:
    async with Client(stdio_params(tmp_path / "reject", MEMORY_CORE_SECURITY_SECRETS="reject")) as client:
        acme = Caller(client, "acme")
        refused = await acme.call("add_memory", session="s1", agent="alice", content=f"key {AK} and {GH}")
        assert error_code(refused) == "SECRET_REJECTED"
        error = (refused.structured_content or {})["error"]
        assert error["kinds"] == {"aws-access-key": 1, "github-token": 1}
        assert {(s["field"], s["kind"], s["start"]) for s in error["secrets"]} == {
            ("content", "aws-access-key", 4), ("content", "github-token", 4 + len(AK) + 5)}
        assert AK not in json.dumps(refused.structured_content) + str(refused.content)
        handoff = await acme.call("create_handoff", session="s1", agent="alice", content=f"PGPASSWORD={PW} psql")
        assert error_code(handoff) == "SECRET_REJECTED"
        assert (await acme.ok("query_recent_turns", session="s1"))["turns"] == []
        assert (await acme.ok("recall", query=""))["messages"] == []
    async with Client(stdio_params(tmp_path / "redact")) as client:
        acme = Caller(client, "acme")
        added = await acme.ok("add_memory", session="s1", agent="alice", content=f"key {AK} and {GH}")
        assert added["redacted"] == {"aws-access-key": 1, "github-token": 1}
        row = (await acme.ok("get_contents", refs=[added["ref"]]))["found"][0]
        assert row["content"] == "key [REDACTED:aws-access-key] and [REDACTED:github-token]"
        clean = await acme.ok("add_memory", session="s1", agent="alice", content="nothing secret here")
        assert "redacted" not in clean


def test_the_cli_add_says_what_it_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    runner = CliRunner()
    data = ["--data-dir", str(tmp_path / "data")]
    who = ["--tenant", "acme", "--session", "s1", "--agent", "op"]
    shown = runner.invoke(app, ["add", *who, f"AWS_ACCESS_KEY_ID={AK}", *data])
    assert shown.exit_code == 0, shown.output
    assert "(secrets redacted: 1 aws-access-key)" in shown.stdout and AK not in shown.stdout
    out = runner.invoke(app, ["add", *who, f"token {GH}", "--json", *data])
    assert json.loads(out.stdout)["redacted"] == {"github-token": 1}
    monkeypatch.setenv("MEMORY_CORE_SECURITY_SECRETS", "reject")
    refused = runner.invoke(app, ["add", *who, f"token {GH}", "--json", *data])
    assert refused.exit_code != 0
    assert json.loads(refused.stdout)["error"]["code"] == "SECRET_REJECTED" and GH not in refused.stdout
