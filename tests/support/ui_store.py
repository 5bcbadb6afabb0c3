"""A small store for the inspector's tests: two tenants, a long session, a handoff chain,
a private memory, memories whose text is HTML and a fact stored three times."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from testbed.mcp_harness import ROOT, server_env
from tools.auth import hash_token

OPERATOR_TOKEN = "operator-secret-token"
AGENT_TOKEN = "agent-acme-token"
ADMIN_TOKEN = "admin-acme-token"  # an agent token with the admin scope: still not the operator's
RESTATED = ("Ledger-svc reads its feature flags from /etc/flags/ledger-svc.yaml.",
            "ledger-svc reads its feature flags from /etc/flags/ledger-svc.yaml",
            "Ledger-svc reads its **feature flags** from /etc/flags/ledger-svc.yaml.")
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="document.title=\'pwned\'"> & <b>bold</b>'
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
TURNS = 60
CLI = [sys.executable, "-c", "from tools.cli.app import main; main()"]


@dataclass(frozen=True)
class Refs:
    hostile: str
    first_handoff: str
    second_handoff: str
    private: str
    other_tenant: str
    turns: list[str]  # s1's turns, oldest first
    restated: list[str]  # one fact stored three times in s2, oldest first (recall collapses them)


def ui_settings() -> dict[str, object]:
    """Overrides for load_settings: the operator token and two tenant-bound agent tokens (write, admin)."""
    return {"server": {"operator_token_sha256": hash_token(OPERATOR_TOKEN),
                       "tokens": {hash_token(AGENT_TOKEN): "acme",
                                  hash_token(ADMIN_TOKEN): {"tenant": "acme", "scope": "admin"}}}}


def config_text() -> str:
    return (f'[server]\noperator_token_sha256 = "{hash_token(OPERATOR_TOKEN)}"\n\n'
            f'[server.tokens]\n"{hash_token(AGENT_TOKEN)}" = "acme"\n'
            f'"{hash_token(ADMIN_TOKEN)}" = {{ tenant = "acme", scope = "admin" }}\n')


def populate(core: MemoryCore) -> Refs:
    turns = core.add_memories([
        {"tenant": "acme", "session": "s1", "agent": "planner" if i % 2 else "coder", "type": "turn",
         "role": "assistant", "content": f"Turn {i}: we discussed the deploy pipeline step {i}.",
         "timestamp": (START + timedelta(minutes=i)).isoformat()}
        for i in range(TURNS)
    ])
    hostile = core.add_memory("acme", "s1", "coder", HOSTILE, type="note",
                              timestamp=(START + timedelta(minutes=TURNS)).isoformat()).ref
    first = core.create_handoff("acme", "s1", "planner", "Handoff one: rotate the staging key next.",
                                timestamp=(START + timedelta(minutes=TURNS + 1)).isoformat()).ref
    second = core.create_handoff("acme", "s1", "planner", "Handoff two: the staging key is rotated; deploy next.",
                                 timestamp=(START + timedelta(minutes=TURNS + 2)).isoformat(),
                                 entities=[{"name": "Staging Key", "kind": "secret"}]).ref
    private = core.add_memory("acme", "s2", "coder", "A private scratch thought about billing.", type="note",
                              visibility="agent", timestamp=(START + timedelta(days=1)).isoformat()).ref
    restated = [core.add_memory("acme", "s2", agent, text, type="note",
                                timestamp=(START + timedelta(hours=16 + i)).isoformat()).ref
                for i, (agent, text) in enumerate(zip(("planner", "coder", "planner"), RESTATED, strict=True))]
    other = core.add_memory("globex", "g1", "bot", "Globex secret roadmap.", type="note",
                            timestamp=(START + timedelta(days=2)).isoformat()).ref
    return Refs(hostile, first, second, private, other, [t.ref for t in turns], restated)


def make_store(tmp_path: Path) -> tuple[Path, Path, Refs]:
    """A populated data directory and a config file with the tokens (hash embedder)."""
    data, config = tmp_path / "data", tmp_path / "memory-core.toml"
    config.write_text(config_text(), encoding="utf-8")
    settings = load_settings(config, environ={}, overrides={"embedding": {"provider": "hash"}})
    with MemoryCore.open(data, settings=settings, embedder=HashEmbedder()) as core:
        refs = populate(core)
    return data, config, refs


@contextmanager
def running_ui(data: Path, config: Path) -> Iterator[str]:
    """`memory-core ui --port 0` as a real subprocess; yields the inspector's URL."""
    proc = subprocess.Popen([*CLI, "ui", "--data-dir", str(data), "--config", str(config), "--port", "0",
                             "--announce", "--json"], cwd=ROOT, env=server_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"memory-core ui exited: {proc.stderr.read() if proc.stderr else ''}")
        yield json.loads(line)["url"]
    finally:
        proc.terminate()
        proc.wait(timeout=15)
