"""Structured logs: a JSON line per tool call with ids, codes and timings, and never content or a secret.

A real server logs at its most verbose (``logs.level = "debug"``, JSON) while the secrets corpus
(testbed/secrets_corpus.py) goes through it as content, queries, session names and failing
arguments; then every line of its stderr is JSON, each call has its line, and no line holds a secret
of the corpus, a content string or the tenant's name.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memory_core.observe import CallRecord
from memory_core.observe.logs import JsonLines, call_fields, configure, tenant_label
from testbed import secrets_corpus as corpus
from testbed.mcp_harness import ROOT, SERVER_COMMAND, Caller, _await_url, http_client, server_env
from testbed.processes import stop

TENANT = "acme-logs-tenant"
MARKER = "harbour-lighthouse-keeper"  # in every content: a line holding it would hold content


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "stderr.log"
    args = [sys.executable, *SERVER_COMMAND, "--http", "--announce", "--host", "127.0.0.1", "--port", "0",
            "--data-dir", str(tmp_path / "data")]
    env = server_env(MEMORY_CORE_LOGS_FORMAT="json", MEMORY_CORE_LOGS_LEVEL="debug")
    with log.open("w") as err:
        proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err, text=True)
        try:
            yield _await_url(proc), log
        finally:
            stop(proc)


async def _corpus_through(url: str) -> int:
    calls = 0
    async with http_client(url, None) as client:
        agent = Caller(client, TENANT)
        for sample in corpus.SAMPLES:
            text = f"{MARKER}: {sample.text}"
            await agent.call("add_memory", session="s1", agent="a1", content=text)
            await agent.call("recall", query=text[:1000])
            await agent.call("create_handoff", session="s1", agent="a1", content=text)
            secret = sample.secrets[0][1] if sample.secrets else MARKER
            await agent.call("add_memory", session=secret[:100], agent=f"bad agent {secret}", content=text)
            await agent.call("get_contents", refs=[f"mem:{secret}"])
            calls += 5
    return calls


@pytest.mark.slow
def test_json_log_lines_carry_call_fields_and_no_content_or_secret_of_the_corpus(
        server_log: tuple[str, Path]) -> None:
    url, log = server_log
    calls = asyncio.run(_corpus_through(url))
    rid = httpx.post(url, headers={"X-Request-Id": "trace-me-123", "Accept": "application/json, text/event-stream"},
                     json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "recall", "arguments": {"tenant": TENANT, "query": MARKER}}},
                     timeout=30)
    assert rid.headers["x-request-id"] == "trace-me-123"
    httpx.get(url.removesuffix("/mcp") + "/healthz").raise_for_status()  # a line written after the calls'
    text = log.read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is JSON
    assert all({"ts", "level", "logger"} <= line.keys() for line in lines)
    tool_lines = [line for line in lines if line.get("event") == "tool_call"]
    assert len(tool_lines) == calls + 1
    assert {line["outcome"] for line in tool_lines} >= {"ok", "INVALID_INPUT"}
    assert all(line["tenant"] == tenant_label(TENANT, "hash") and line["tenant"].startswith("h:")
               for line in tool_lines)
    assert all(isinstance(line["ms"], float) and line["request_id"] for line in tool_lines)
    assert any(line["request_id"] == "trace-me-123" and line["tool"] == "recall" for line in tool_lines)
    assert any("stages_ms" in line and "embed" in line["stages_ms"] for line in tool_lines if line["tool"] == "recall")
    assert any("group_commit" in line.get("waits_ms", {}) for line in tool_lines if line["tool"] == "add_memory")
    assert corpus.leaks(text, corpus.ALL_SECRETS) == []
    assert MARKER not in text and TENANT not in text


def test_a_call_line_holds_ids_codes_and_timings_only() -> None:
    record = CallRecord("recall", "r-1", tenant="acme", outcome="TENANT_MISMATCH", elapsed_s=0.0123,
                        stages_ms={"embed": 1.234567}, waits_ms={"writer_lock": 0.5})
    assert call_fields(record, "plain") == {"event": "tool_call", "request_id": "r-1", "tool": "recall",
                                            "tenant": "acme", "outcome": "TENANT_MISMATCH", "ms": 12.3,
                                            "stages_ms": {"embed": 1.23}, "waits_ms": {"writer_lock": 0.5}}
    assert "tenant" not in call_fields(record, "omit")
    assert call_fields(record, "hash")["tenant"] == tenant_label("acme", "hash") != "acme"


def test_json_lines_keep_an_exceptions_type_and_stack_but_not_its_message_which_may_quote_input() -> None:
    out = io.StringIO()
    handler = configure("json", "info", stream=out)
    try:
        try:
            raise ValueError(f"bad value {MARKER}")
        except ValueError:
            logging.getLogger("tools.mcp.server").exception("tool recall failed unexpectedly")
        logging.getLogger("mcp.server.streamable_http").debug("Received message: %s", MARKER)  # a library's
        logging.getLogger("chromadb").info("quoting %s", MARKER)
    finally:
        logging.getLogger().removeHandler(handler)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(lines) == 1, lines  # other libraries stay at WARNING, whatever logs.level says
    line: dict[str, Any] = lines[0]
    assert line["message"] == "tool recall failed unexpectedly" and line["exc_type"] == "builtins.ValueError"
    assert any("test_json_lines_keep" in frame for frame in line["stack"])
    assert MARKER not in out.getvalue()


def test_text_logs_read_as_key_values() -> None:
    out = io.StringIO()
    handler = configure("text", "info", stream=out)
    try:
        from memory_core.observe.logs import log_call

        log_call(CallRecord("add_memory", "r-2", tenant="acme", elapsed_s=0.002), "hash")
    finally:
        logging.getLogger().removeHandler(handler)
    assert 'tool call request_id="r-2" tool="add_memory" tenant="h:' in out.getvalue()
    assert JsonLines  # the formatter the JSON option installs
