"""One recall response shape: `memory-core recall --json` and the MCP recall tool build it the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings
from testbed.mcp_in_process import served
from tools.cli.app import app

CONFIG = '[embedding]\nprovider = "hash"\n[operating_context.agents]\nalice = "alpha"\n'


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_cli_and_the_mcp_recall_carry_the_same_envelope(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    config = tmp_path / "c.toml"
    config.write_text(CONFIG, encoding="utf-8")
    settings = load_settings(config, environ={})
    data = tmp_path / "data"
    with MemoryCore.open(data, settings=settings) as core:
        core.add_memory("acme", "s1", "alice", "the orchard pear harvest", project_id="alpha")
    query = {"tenant": "acme", "query": "pear harvest", "project_id": "@auto", "viewer": "bob"}
    cli = CliRunner().invoke(app, ["recall", "pear harvest", "-t", "acme", "--project-id", "@auto", "--viewer", "bob",
                                   "--config", str(config), "--data-dir", str(data), "--json"])  # fmt: skip
    assert cli.exit_code == 0, cli.output
    by_cli = json.loads(cli.stdout)
    async with Client(served(settings, str(data))) as client:
        by_mcp = json.loads((await client.call_tool("recall", query)).content[0].text)  # type: ignore[union-attr]
    envelope = {"messages", "gate_fallback", "resolved_project_id", "warning"}
    assert set(by_cli) <= envelope and set(by_mcp) <= envelope | {"shared", "full_content_budget_chars"}
    for key in ("resolved_project_id", "warning"):
        assert by_cli[key] == by_mcp[key], key
    assert "operating_context_warning" not in by_mcp
