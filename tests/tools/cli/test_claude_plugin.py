"""The Claude Code plugin in the checkout: valid JSON, the same events and command as `hooks install`.

The real Claude Code installs and runs it in tests/tools/cli/test_claude_code_e2e.py."""

from __future__ import annotations

import json
import shlex

from memory_core.harness.install import entries, is_ours
from testbed.paths import ROOT

PLUGIN = ROOT / "integrations" / "claude-code"


def test_the_marketplace_lists_the_plugin_in_the_checkout() -> None:
    marketplace = json.loads((ROOT / ".claude-plugin" / "marketplace.json").read_text())
    (plugin,) = marketplace["plugins"]
    assert (ROOT / plugin["source"]).resolve() == PLUGIN.resolve()
    manifest = json.loads((PLUGIN / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == plugin["name"] == "memory-core"


def test_the_plugin_hooks_the_events_hooks_install_does_with_our_command() -> None:
    hooks = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]
    wanted = {e.event: e.matcher for e in entries("memory-core hook")}
    assert {event: groups[0].get("matcher") for event, groups in hooks.items()} == wanted
    for groups in hooks.values():
        (command,) = [c["command"] for c in groups[0]["hooks"]]
        assert is_ours(command) and shlex.split(command)[:2] == ["memory-core", "hook"]
        assert "--tenant" in command and "--data-dir" in command


def test_the_plugin_serves_the_mcp_tools_on_the_same_data_directory() -> None:
    server = json.loads((PLUGIN / ".mcp.json").read_text())["mcpServers"]["memory-core"]
    assert server["command"] == "memory-core" and server["args"][:2] == ["serve", "--data-dir"]
    assert server["args"][2].endswith("/.memory-core}") and "MEMORY_CORE_STORAGE_DATA_DIR" in server["args"][2]
    hook = json.loads((PLUGIN / "hooks" / "hooks.json").read_text())["hooks"]["Stop"][0]["hooks"][0]["command"]
    assert "${MEMORY_CORE_STORAGE_DATA_DIR:-$HOME/.memory-core}" in hook
    assert server["env"]["MEMORY_CORE_TENANT"] == "${MEMORY_CORE_TENANT:-local}" and "MEMORY_CORE_TENANT:-local" in hook
