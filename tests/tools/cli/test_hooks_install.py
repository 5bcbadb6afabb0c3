"""``memory-core hooks install / uninstall``: our entries merged into settings.json, idempotently,
every other hook and setting kept."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_core.harness.install import is_ours
from tools.cli.app import app

runner = CliRunner()
THEIRS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(git status)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}],
        "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "echo hi"},
                                                           {"type": "command", "command": "memory-core hook --old"}]}],
    },
}


def install(settings: Path, *args: str) -> dict[str, object]:
    result = runner.invoke(app, ["hooks", "install", "--settings", str(settings), "--json", *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def ours(settings: Path) -> dict[str, list[str]]:
    hooks = json.loads(settings.read_text())["hooks"]
    return {event: [c["command"] for g in groups for c in g["hooks"] if is_ours(c["command"])]
            for event, groups in hooks.items()}


def test_install_merges_our_hooks_and_keeps_everything_else(tmp_path: Path) -> None:
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(THEIRS, indent=2))
    answer = install(settings, "--data-dir", str(tmp_path / "data"), "--tenant", "acme")
    assert answer["events"] == ["SessionStart", "PreCompact", "Stop", "SessionEnd"]
    data = json.loads(settings.read_text())
    assert data["model"] == "opus" and data["permissions"] == THEIRS["permissions"]
    assert data["hooks"]["PreToolUse"] == THEIRS["hooks"]["PreToolUse"]
    assert {"type": "command", "command": "notify-send done"} in data["hooks"]["Stop"][0]["hooks"]
    assert [c["command"] for c in data["hooks"]["SessionStart"][0]["hooks"]] == ["echo hi"]  # the old one of ours went
    command = str(answer["command"])
    assert shlex.split(command)[-5:] == ["hook", "--data-dir", str((tmp_path / "data").resolve()), "--tenant", "acme"]
    assert ours(settings) == {"PreToolUse": [], "Stop": [command], "SessionStart": [command], "PreCompact": [command],
                              "SessionEnd": [command]}
    start = [g for g in data["hooks"]["SessionStart"] if g.get("matcher") == "startup|resume|compact"]
    assert start and start[0]["hooks"][0]["timeout"] == 30


def test_installing_twice_changes_nothing(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(THEIRS))
    install(settings, "--tenant", "acme")
    once = settings.read_text()
    install(settings, "--tenant", "acme")
    assert settings.read_text() == once


def test_prompt_injection_adds_the_prompt_hook_and_a_reinstall_without_it_takes_it_out(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    answer = install(settings, "--prompt-injection")
    assert ours(settings)["UserPromptSubmit"] == [f"{answer['command']} --prompt-injection"]
    install(settings)
    assert "UserPromptSubmit" not in ours(settings)


def test_uninstall_takes_ours_out_and_leaves_theirs_as_they_were(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(THEIRS))
    install(settings, "--prompt-injection")
    result = runner.invoke(app, ["hooks", "uninstall", "--settings", str(settings), "--json"])
    assert result.exit_code == 0 and json.loads(result.output)["removed"] == 5
    data = json.loads(settings.read_text())
    expected = json.loads(json.dumps(THEIRS))
    expected["hooks"]["SessionStart"][0]["hooks"].pop()  # the memory-core command that was there before
    assert data == expected
    again = runner.invoke(app, ["hooks", "uninstall", "--settings", str(settings)])
    assert again.exit_code == 0 and "holds no memory-core hook" in again.output


def test_uninstalling_the_last_hook_leaves_no_empty_hooks_object(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"model": "opus"}))
    install(settings)
    runner.invoke(app, ["hooks", "uninstall", "--settings", str(settings)])
    assert json.loads(settings.read_text()) == {"model": "opus"}


def test_a_settings_file_that_is_not_json_is_left_alone(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text("{ this is: not json")
    result = runner.invoke(app, ["hooks", "install", "--settings", str(settings)])
    assert result.exit_code == 5 and "CONFIG_INVALID" in result.output
    assert settings.read_text() == "{ this is: not json"


def test_project_and_user_choose_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert runner.invoke(app, ["hooks", "install", "--project"]).exit_code == 0
    assert (tmp_path / ".claude" / "settings.json").is_file()
    assert runner.invoke(app, ["hooks", "install"]).exit_code == 0  # --user is the default
    assert (tmp_path / "home" / ".claude" / "settings.json").is_file()
    both = runner.invoke(app, ["hooks", "install", "--project", "--user"])
    assert both.exit_code == 2


@pytest.mark.parametrize(("command", "mine"), [
    ("memory-core hook", True), ("/home/me/.local/bin/memory-core hook --data-dir /d", True),
    ("/usr/bin/python3.11 -P -m memory_core hook --tenant a", True), ("MEMORY_CORE_TENANT=x memory-core hook", True),
    ("memory-core serve", False), ("memory-core hooks install", False), ("my-memory-core-wrapper hook", False),
    ("echo hook", False), (None, False),
])
def test_our_commands_are_recognised_and_no_others(command: str | None, mine: bool) -> None:
    assert is_ours(command) is mine
