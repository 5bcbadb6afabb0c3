"""``memory-core hook`` as a harness runs it: a subprocess, a payload on stdin, exit 0 whatever happens."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.harness.store import Binding
from testbed.mcp_harness import server_env
from testbed.paths import ROOT
from testbed.processes import stop_shared_servers
from tests.support.backends import open_core
from tests.support.claude_transcript import Transcript, payload
from tools.bridge.locate import live_announcement
from tools.cli.hook_store import SharedStore

SECRET = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "data"
    yield path
    stop_shared_servers(path)


def run_hook(data_dir: Path, tmp_path: Path, stdin: bytes, *args: str, timeout: float = 120,
             **env: str) -> subprocess.CompletedProcess[bytes]:
    environment = server_env(**{"MEMORY_CORE_TENANT": "acme", "XDG_CACHE_HOME": str(tmp_path / "cache"),
                                "MEMORY_CORE_SERVER_SHARED_IDLE_S": "60", **env})
    environment = {k: v for k, v in environment.items() if v}  # "": unset
    return subprocess.run([sys.executable, "-P", "-m", "memory_core", "hook", "--data-dir", str(data_dir), *args],
                          input=stdin, capture_output=True, env=environment, cwd=ROOT, timeout=timeout)


def one_line(result: subprocess.CompletedProcess[bytes]) -> str:
    lines = result.stderr.decode().splitlines()
    assert result.returncode == 0 and result.stdout == b"", result
    assert len(lines) == 1 and lines[0].startswith("memory-core hook: "), lines
    return lines[0]


def work(t: Transcript) -> None:
    t.prompt(f"Add cursor pagination to the list endpoint; use my token {SECRET} for the staging API")
    t.reply("Reading the handler first, then the tests.")
    t.tool("Read", {"file_path": "/work/project/api.py"}, "def list_items(): ...")
    t.tool("Edit", {"file_path": "/work/project/api.py", "old_string": "a", "new_string": "b"}, "ok")
    t.tool("Bash", {"command": "pytest -x"}, "Exit code 1\nFAILED tests/test_api.py::test_list", error=True)
    t.prompt("Keep the old page parameter working as an alias. " * 9)  # a long last request: a long handoff
    t.reply("Noted; the old parameter stays as an alias of the cursor.")


def shared(data_dir: Path) -> SharedStore:
    server = live_announcement(data_dir)
    assert server is not None
    return SharedStore(server, Binding("acme", "claude-code"), "write", deadline=time.monotonic() + 30)


@pytest.mark.parametrize("garbage", [b"", b"\x00\xff\xfe garbage", b"[1, 2, 3]", b'{"hook_event_name": 3}',
                                     b"{" * 10_000, b"x" * (5 << 20)], ids=["empty", "binary", "array", "name",
                                                                            "braces", "5MiB"])
def test_garbage_on_stdin_is_one_line_on_stderr_and_exit_0(garbage: bytes, data_dir: Path, tmp_path: Path) -> None:
    assert "INVALID_INPUT" in one_line(run_hook(data_dir, tmp_path, garbage))
    assert not data_dir.exists()


def test_without_a_tenant_the_hook_says_so_once(data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("hello")
    result = run_hook(data_dir, tmp_path, payload("Stop", t), MEMORY_CORE_TENANT="")
    assert "TENANT_REQUIRED" in one_line(result)


def test_a_session_start_without_a_data_directory_does_nothing_at_once(data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    started = time.monotonic()
    result = run_hook(data_dir, tmp_path, payload("SessionStart", t, source="startup"))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"")
    assert not data_dir.exists() and time.monotonic() - started < 30


def test_prompts_cost_nothing_without_prompt_injection(data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    result = run_hook(data_dir, tmp_path, payload("UserPromptSubmit", t, prompt="hi"))
    assert (result.returncode, result.stdout, result.stderr) == (0, b"", b"") and not data_dir.exists()


def test_a_locked_data_directory_is_one_line(data_dir: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("hello")
    holder = open_core("persistent", data_dir, request)
    try:
        result = run_hook(data_dir, tmp_path, payload("Stop", t), "--store", "direct")
    finally:
        holder.close()
    assert "STORE_LOCKED" in one_line(result)


def test_a_missing_transcript_is_one_line(data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.path.unlink()
    assert "not there" in one_line(run_hook(data_dir, tmp_path, payload("Stop", t), "--store", "direct"))


@pytest.mark.parametrize("store", ["shared", "direct"])
def test_capture_handoff_and_injection_through_either_store(store: str, data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    work(t)
    for _ in range(2):  # the same transcript twice: the second stores nothing
        stop = run_hook(data_dir, tmp_path, payload("Stop", t), "--store", store)
        assert (stop.returncode, stop.stdout, stop.stderr) == (0, b"", b"")
    pre = run_hook(data_dir, tmp_path, payload("PreCompact", t, trigger="auto"), "--store", store)
    assert (pre.returncode, pre.stdout, pre.stderr) == (0, b"", b"")
    t.compact_echo()
    start = run_hook(data_dir, tmp_path, payload("SessionStart", t, source="compact"), "--store", store)
    assert start.returncode == 0 and start.stderr == b""
    answer = json.loads(start.stdout)
    context = answer["hookSpecificOutput"]["additionalContext"]
    assert answer["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert "Newest handoff [mem:" in context and "staging API" in context and SECRET not in context
    assert "Files edited: /work/project/api.py" in context and "cut;" not in context  # the handoff whole
    if store == "shared":
        rows = shared(data_dir).session_rows(t.session, 100)
        stop_shared_servers(data_dir)
    else:
        core = open_core("persistent", data_dir, None)  # type: ignore[arg-type]
        try:
            rows = core.query_recent_turns("acme", t.session, 100, viewer="claude-code").turns  # type: ignore[assignment]
        finally:
            core.close()
    assert len(rows) == 7 and all(SECRET not in r.content for r in rows)


def test_a_capture_killed_midway_loses_nothing_acknowledged_and_doubles_nothing(data_dir: Path,
                                                                               tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("warm up")
    assert run_hook(data_dir, tmp_path, payload("Stop", t)).returncode == 0  # the shared server is up now
    for i in range(300):
        t.prompt(f"prompt number {i}: tune the cursor page size")
    environment = server_env(MEMORY_CORE_TENANT="acme", XDG_CACHE_HOME=str(tmp_path / "cache"),
                             MEMORY_CORE_SERVER_SHARED_IDLE_S="60")
    proc = subprocess.Popen([sys.executable, "-P", "-m", "memory_core", "hook", "--data-dir", str(data_dir)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment,
                            cwd=ROOT)
    assert proc.stdin is not None
    proc.stdin.write(payload("Stop", t))
    proc.stdin.close()
    store = shared(data_dir)
    deadline = time.monotonic() + 60
    while len(store.session_rows(t.session, 40)) < 30 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = len(store.session_rows(t.session, 1000))
    assert 30 <= before < 301, before  # killed after some rows were acknowledged, before all of them
    rerun = run_hook(data_dir, tmp_path, payload("Stop", t))
    assert (rerun.returncode, rerun.stderr) == (0, b"")
    after = [r.content for r in store.session_rows(t.session, 1000)]
    assert len(after) == 301 and len(set(after)) == 301


def test_a_warm_event_loads_no_pydantic_and_no_store(data_dir: Path, tmp_path: Path) -> None:
    t = Transcript(tmp_path / "t.jsonl")
    work(t)
    assert run_hook(data_dir, tmp_path, payload("Stop", t)).returncode == 0  # settings cached, server up
    t.prompt("one more")
    warm = run_hook(data_dir, tmp_path, payload("Stop", t), PYTHONPROFILEIMPORTTIME="1")
    imported = {line.split("|")[-1].strip() for line in warm.stderr.decode().splitlines() if "import time" in line}
    # the runner ran (it loads through memory_core.harness's lazy names, which -X importtime does not list:
    # importlib.import_module bypasses its hook; what the runner itself imports is listed)
    assert warm.returncode == 0 and {"memory_core.harness.block", "memory_core.harness.transcript"} <= imported
    assert not {"pydantic", "chromadb", "networkx", "typer", "mcp"} & imported


def test_the_hook_options_default_to_the_settings_defaults() -> None:
    from dataclasses import fields

    from memory_core.harness.runner import HookOptions
    from memory_core.settings.schema import HooksSettings
    from tools.cli.hook import HookConfig

    configured = HookConfig("/d", None, "t", "a", "write", HooksSettings().model_dump(mode="json")).options(False)
    defaults = HookOptions()
    assert {f.name: getattr(configured, f.name) for f in fields(HookOptions)} == \
        {f.name: getattr(defaults, f.name) for f in fields(HookOptions)}


def test_a_data_directory_that_cannot_be_made_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    t = Transcript(tmp_path / "t.jsonl")
    t.prompt("hello")
    result = run_hook(blocker / "data", tmp_path, payload("Stop", t))
    assert "SERVER_UNAVAILABLE" in one_line(result)


@pytest.mark.slow  # a direct store and litellm load in the hook's process
@pytest.mark.parametrize(("answer", "source", "error"), [("ok", "model", None), ("down", "hook", "http 500")])
def test_a_configured_model_writes_the_handoff_and_a_failing_one_leaves_the_draft(
        answer: str, source: str, error: str | None, data_dir: Path, tmp_path: Path) -> None:
    from tests.support.fake_llm import fake_llm, ok, status

    t = Transcript(tmp_path / "t.jsonl")
    work(t)
    said = "Tight handoff: document the cursor format; pytest -x still fails."
    with fake_llm(ok(said) if answer == "ok" else status(500)) as fake:
        provider = {"MEMORY_CORE_MODEL_PROVIDER_ENABLED": "true", "MEMORY_CORE_MODEL_PROVIDER_API_BASE": fake.api_base,
                    "MEMORY_CORE_MODEL_PROVIDER_MAX_RETRIES": "0", "MEMORY_CORE_HOOKS_TIMEOUT_S": "120"}
        pre = run_hook(data_dir, tmp_path, payload("PreCompact", t, trigger="auto"), "--store", "direct", **provider)
    assert (pre.returncode, pre.stdout, pre.stderr) == (0, b"", b"")
    core = open_core("persistent", data_dir, None)  # type: ignore[arg-type]
    try:
        handoff = core.recall("acme", "", type="handoff", limit=1, viewer="claude-code").messages[0]
    finally:
        core.close()
    assert handoff.metadata["handoff_source"] == source and handoff.metadata.get("handoff_error") == error
    assert ("Tight handoff" in handoff.content) is (answer == "ok")
    assert "Last request" in handoff.content or answer == "ok"
