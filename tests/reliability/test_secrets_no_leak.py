"""Under the default policy no secret of the corpus can be read back from anywhere.

The corpus (testbed/secrets_corpus.py) is written through every write path: over MCP (a real
client on the streamable HTTP server, its log captured) with add_memory, create_handoff and
update_memory, then through the library with add_memory, add_memories, update_memory,
create_handoff, a JSONL import and a session summary whose model (a real local HTTP server standing
in for the provider) echoes a secret back. Every read path is then searched for each raw secret (and
for distinctive slices of it): recall, recall_with_context, get_contents, check_memory, history,
query_recent_turns, recover_context, summarize_session, entities, export, the inspector's pages,
the server's log lines, and every file of the data directory (the SQLite graph and its WAL, Chroma's
SQLite and index files, any journal).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.testclient import TestClient

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from memory_core.settings import load_settings
from memory_core.write.rows import content_hash
from testbed import secrets_corpus as corpus
from testbed.mcp_harness import ROOT, SERVER_COMMAND, _await_url, server_env
from testbed.processes import stop
from testbed.secrets_corpus import SAMPLES, Fake
from tests.support.fake_llm import FakeLLM, fake_llm, ok
from tests.support.ui_store import OPERATOR_TOKEN, ui_settings
from tools.ui import standalone_app

TENANT = "acme"
KEY_ENV = "MEMORY_CORE_TEST_SUMMARY_KEY"
EXTRA = Fake(4141)
ECHOED = EXTRA.aws_access_key()  # what the model "summary" echoes back
META_TOKEN = EXTRA.github_classic()  # carried in metadata
UPDATED = EXTRA.stripe_live()  # written by corrections
IMPORTED = EXTRA.password()  # in the imported file
SECRETS: list[tuple[str, str]] = [(k, v) for s in SAMPLES for k, v in s.secrets] + [
    ("aws-access-key", ECHOED), ("github-token", META_TOKEN), ("stripe-key", UPDATED), ("password", IMPORTED)]


def leaks(text: str) -> list[str]:
    return corpus.leaks(text, SECRETS)


def file_leaks(root: Path) -> list[str]:
    return corpus.file_leaks(root, SECRETS)


@dataclass
class Written:
    mcp_refs: list[str] = field(default_factory=list)
    lib_refs: list[str] = field(default_factory=list)
    responses: list[str] = field(default_factory=list)  # every MCP response, as text
    log: str = ""
    redacted: list[dict[str, int]] = field(default_factory=list)


def provider_env(fake: FakeLLM) -> dict[str, str]:
    return {"MEMORY_CORE_MODEL_PROVIDER_ENABLED": "true", "MEMORY_CORE_MODEL_PROVIDER_API_BASE": fake.api_base,
            "MEMORY_CORE_MODEL_PROVIDER_API_KEY_ENV": KEY_ENV, KEY_ENV: "sk-fake-test-key",
            "MEMORY_CORE_MODEL_PROVIDER_MAX_RETRIES": "0"}


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with fake_llm(ok(f"The session deployed ledger-svc with key {ECHOED} and rotated it.")) as server:
        yield server


async def write_and_read_over_mcp(data_dir: Path, fake: FakeLLM, written: Written) -> None:
    log_path = data_dir.parent / "server.log"
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(data_dir)]
    with log_path.open("w") as log:
        proc = subprocess.Popen(args, cwd=ROOT, env=server_env(**provider_env(fake)), stdout=subprocess.PIPE,
                                stderr=log, text=True)
        try:
            url = _await_url(proc)
            async with httpx2.AsyncClient(timeout=60.0) as http, \
                    Client(streamable_http_client(url, http_client=http)) as client:
                async def call(tool: str, **arguments: Any) -> dict[str, Any]:
                    result = await client.call_tool(tool, {"tenant": TENANT, **arguments})
                    assert not result.is_error, result.content
                    assert result.structured_content is not None
                    written.responses.append(json.dumps(result.structured_content))
                    return result.structured_content

                for sample in SAMPLES[0::2]:
                    out = await call("add_memory", session="mcp", agent="alice", content=sample.text,
                                     metadata={"tool": "shell", "env": {"DEPLOY_TOKEN": META_TOKEN}})
                    written.mcp_refs.append(out["ref"])
                    written.redacted.append(out.get("redacted", {}))
                hand = await call("create_handoff", session="mcp", agent="alice", content=SAMPLES[1].text)
                assert hand["redacted"]
                fixed = await call("update_memory", ref=written.mcp_refs[0], agent="alice",
                                   content=f"corrected: the live key is {UPDATED}")
                assert fixed["redacted"] == {"stripe-key": 1}
                written.mcp_refs += [hand["ref"], fixed["ref"]]
                for sample in SAMPLES[0::2]:
                    await call("recall", query=sample.name, limit=20, full_content=True)
                await call("recall", query="", limit=50, full_content=True)
                await call("get_contents", refs=written.mcp_refs[:20])
                for ref in written.mcp_refs:
                    await call("check_memory", ref=ref)
                await call("query_recent_turns", session="mcp", limit=100)
                await call("summarize_session", session="mcp")
                await call("recover_context", session="mcp")
        finally:
            stop(proc)
    written.log = log_path.read_text()


def library_settings(fake: FakeLLM) -> Any:
    return load_settings(environ={KEY_ENV: "sk-fake-test-key"}, overrides={
        "embedding": {"provider": "hash"}, **ui_settings(),
        "model_provider": {"enabled": True, "api_base": fake.api_base, "api_key_env": KEY_ENV, "max_retries": 0}})


def write_through_the_library(core: MemoryCore, written: Written) -> None:
    half = SAMPLES[1::2]
    for sample in half[:10]:
        result = core.add_memory(TENANT, "lib", "bob", sample.text, type="note",
                                 source={"id": "tool:shell", "cmd": sample.text[:120]})
        written.lib_refs.append(result.ref)
        written.redacted.append(result.redacted)
    batch = core.add_memories([{"tenant": TENANT, "session": "lib", "agent": "bob", "content": s.text,
                                "entities": [{"name": "ledger-svc", "aliases": [META_TOKEN]}]} for s in half[10:]])
    written.lib_refs += [r.ref for r in batch]
    written.redacted += [r.redacted for r in batch]
    updated = core.update_memory(TENANT, written.lib_refs[0], agent="bob", content=f"now uses {UPDATED}")
    handoff = core.create_handoff(TENANT, "lib", "bob", f"next: rotate {ECHOED} and {META_TOKEN}")
    written.lib_refs += [updated.added.ref, handoff.ref]
    lines = [json.dumps({"ref": "mem:900001", "tenant": TENANT, "session": "imp", "agent": "carol", "type": "note",
                         "salience": 0.5, "timestamp": "2026-03-01T10:00:00+00:00", "content": text,
                         "content_hash": content_hash(text), "metadata": {"password": IMPORTED}})
             for text in (f"db_password={IMPORTED} for the import", )]
    counts = import_lines(core.operator_parts(), lines, TENANT)
    assert counts.written == 1 and counts.errors == 0
    written.lib_refs.append(counts.refs["mem:900001"])
    rewritten = import_lines(core.operator_parts(), lines, TENANT).written
    assert rewritten == 0, "a re-import of the same file writes nothing"


def read_everything(core: MemoryCore, written: Written) -> list[str]:
    out: list[str] = []
    refs = written.mcp_refs + written.lib_refs
    for sample in SAMPLES:
        out += [json.dumps(m.to_dict()) for m in core.recall(TENANT, sample.name, limit=20, deep=True).messages]
    out += [json.dumps(m.to_dict()) for m in core.recall(TENANT, "", limit=200).messages]
    out += [json.dumps(m.to_dict()) for m in core.recall_with_context(
        TENANT, "deploy key", [{"role": "user", "content": "what about the keys?"}], limit=50).messages]
    out += [json.dumps(m.to_dict()) for m in core.get_contents(TENANT, refs).found]
    for ref in refs:
        check = core.check_memory(TENANT, ref)
        out.append(json.dumps(check.memory.to_dict()) + json.dumps(check.neighbours, default=str))
        out += [json.dumps(m.to_dict()) for m in core.history(TENANT, ref)]
    for session in ("mcp", "lib", "imp"):
        out += [json.dumps(m.to_dict()) for m in core.query_recent_turns(TENANT, session, 100).turns]
        episode = core.summarize_session(TENANT, session)
        out.append(json.dumps(episode.to_dict()))
        recovery = core.recover_context(TENANT, session)
        out.append(json.dumps([recovery.handoff.to_dict() if recovery.handoff else None,
                               recovery.episode.to_dict() if recovery.episode else None,
                               [t.to_dict() for t in recovery.turns.turns]]))
    out += [json.dumps([e.__dict__ if hasattr(e, "__dict__") else str(e) for e in core.list_entities(TENANT)],
                       default=str)]
    out += [json.dumps(line) for line in export_tenant(core.operator_parts(), TENANT)]
    client = TestClient(standalone_app(core), base_url="http://127.0.0.1:8766",
                        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    pages = [("/ui/", {}), ("/ui/tenant", {"t": TENANT})]
    pages += [("/ui/session", {"t": TENANT, "s": s}) for s in ("mcp", "lib", "imp")]
    pages += [("/ui/memory", {"t": TENANT, "ref": r}) for r in refs]
    pages += [("/ui/api/graph", {"t": TENANT, "ref": r}) for r in refs[:5]]
    pages += [("/ui/search", {"t": TENANT, "q": q}) for q in ("key token password", "deploy", "")]
    for path, params in pages:
        response = client.get(path, params=params)
        assert response.status_code == 200, (path, params, response.status_code)
        out.append(response.text)
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, fake: FakeLLM) -> Iterator[tuple[Path, Written, list[str]]]:
    import anyio

    data_dir = tmp_path_factory.mktemp("no-leak") / "data"
    written = Written()
    anyio.run(write_and_read_over_mcp, data_dir, fake, written)
    with MemoryCore.open(data_dir, settings=library_settings(fake), embedder=HashEmbedder()) as core:
        write_through_the_library(core, written)
        reads = read_everything(core, written)
    yield data_dir, written, reads


def test_every_write_reported_the_kinds_it_redacted(store: tuple[Path, Written, list[str]]) -> None:
    _data_dir, written, _reads = store
    assert all(written.redacted), "every corpus sample here holds a secret, or its metadata does"
    counted = {kind for r in written.redacted for kind in r}
    assert {"private-key", "aws-access-key", "github-token", "password", "url-credentials"} <= counted


def test_no_mcp_response_holds_a_secret(store: tuple[Path, Written, list[str]]) -> None:
    _data_dir, written, _reads = store
    assert len(written.responses) > 40
    assert leaks("\n".join(written.responses)) == []
    assert any("[REDACTED:" in r for r in written.responses)


def test_no_server_log_line_holds_a_secret(store: tuple[Path, Written, list[str]]) -> None:
    _data_dir, written, _reads = store
    assert leaks(written.log) == []


def test_no_library_read_export_summary_or_inspector_page_holds_a_secret(
        store: tuple[Path, Written, list[str]]) -> None:
    _data_dir, _written, reads = store
    joined = "\n".join(reads)
    assert "[REDACTED:aws-access-key]" in joined  # the echoed summary is there, redacted
    assert leaks(joined) == []


def test_no_file_of_the_data_directory_holds_a_secret(store: tuple[Path, Written, list[str]]) -> None:
    data_dir, _written, _reads = store
    files = [p for p in data_dir.rglob("*") if p.is_file()]
    assert any(p.name.endswith(".sqlite3") for p in files) and len(files) > 3
    assert file_leaks(data_dir) == []


def test_the_check_finds_a_secret_where_there_is_one(tmp_path: Path) -> None:
    """The searches above can fail: the same checks on a store written with security.secrets = "allow"."""
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "security": {"secrets": "allow"}})
    with MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder()) as core:
        ref = core.add_memory(TENANT, "s", "a", SAMPLES[0].text).ref
        assert leaks(json.dumps(core.get_contents(TENANT, [ref]).found[0].to_dict()))
    assert file_leaks(tmp_path / "data")


pytestmark = pytest.mark.slow  # a server subprocess, the model stand-in and ~60 writes and reads: ~40 s on 2 cores
