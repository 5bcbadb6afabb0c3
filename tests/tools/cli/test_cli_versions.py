"""The operator's version commands (history, update, lock, unlock) through Typer's runner, on an
embedded store: JSON for scripts, tables for people, coded exit codes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings
from tools.cli.app import app

runner = CliRunner()


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, dict[str, str]]]:
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings()) as core:
        refs = {"fact": core.add_memory("acme", "s1", "ann", "the build uses node 18", type="fact").ref,
                "private": core.add_memory("acme", "s1", "ann", "ann's private note", type="note",
                                           visibility="agent").ref}
    yield path, refs


def run(path: Path, *args: str) -> tuple[int, Any]:
    result = runner.invoke(app, [*args, "--data-dir", str(path), "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def test_update_then_history_shows_the_chain_and_recall_shows_the_newest(store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    code, new = run(path, "update", refs["fact"], "the build uses node 20", "--tenant", "acme", "--agent", "bob")
    assert code == 0 and new["supersedes"] == refs["fact"] and new["created"] is True
    code, hist = run(path, "history", new["ref"], "--tenant", "acme")
    assert code == 0 and [v["ref"] for v in hist["versions"]] == [refs["fact"], new["ref"]]
    assert hist["versions"][0]["superseded"] is True and hist["versions"][1]["agent"] == "bob"
    code, found = run(path, "recall", "build node", "--tenant", "acme")
    assert code == 0 and [m["ref"] for m in found["messages"]] == [new["ref"]]
    table = runner.invoke(app, ["history", refs["fact"], "--tenant", "acme", "--data-dir", str(path)])
    assert table.exit_code == 0 and "2 version(s)" in table.stdout and "current" in table.stdout


@pytest.mark.slow
def test_a_stale_or_locked_update_exits_6_with_its_code_and_unlock_lets_it_through(
        store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    _code, new = run(path, "update", refs["fact"], "the build uses node 20", "--tenant", "acme")
    code, out = run(path, "update", refs["fact"], "the build uses node 16", "--tenant", "acme")
    assert (code, out["error"]["code"]) == (6, "SUPERSEDED")
    assert run(path, "lock", new["ref"], "--tenant", "acme") == (0, {"ref": new["ref"], "locked": True,
                                                                       "changed": True})
    for args in (("update", new["ref"], "x"), ("delete", new["ref"])):
        code, out = run(path, *args, "--tenant", "acme")
        assert (code, out["error"]["code"]) == (6, "LOCKED"), args
    assert run(path, "unlock", new["ref"], "--tenant", "acme")[1]["changed"] is True
    assert run(path, "unlock", new["ref"], "--tenant", "acme")[1]["changed"] is False
    assert run(path, "update", new["ref"], "--salience", "0.9", "--tenant", "acme")[0] == 0


@pytest.mark.slow
def test_the_operator_may_correct_a_private_memory_and_bad_input_has_its_exit_code(
        store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    code, new = run(path, "update", refs["private"], "ann's corrected note", "--tenant", "acme")
    assert code == 0 and new["supersedes"] == refs["private"]
    assert run(path, "update", "mem:999", "x", "--tenant", "acme")[0] == 3
    assert run(path, "history", refs["fact"], "--tenant", "globex")[0] == 3  # another tenant's ref: missing
    assert run(path, "update", refs["fact"], "--tenant", "acme")[0] == 2  # nothing to change
    assert run(path, "update", refs["fact"], "x", "--metadata", "[1]", "--tenant", "acme")[0] == 2
    assert run(path, "lock", refs["fact"])[1]["error"]["code"] == "TENANT_REQUIRED"


@pytest.mark.slow
def test_show_lists_the_version_chain_of_a_corrected_memory(store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    _code, new = run(path, "update", refs["fact"], "the build uses node 20", "--tenant", "acme")
    shown = runner.invoke(app, ["show", refs["fact"], "--tenant", "acme", "--data-dir", str(path)])
    assert shown.exit_code == 0 and "versions" in shown.stdout and new["ref"] in shown.stdout
    code, out = run(path, "show", new["ref"], "--tenant", "acme")
    assert code == 0 and [v["ref"] for v in out["neighbours"]["versions"]] == [refs["fact"], new["ref"]]


def test_a_metadata_only_update_is_a_new_version_not_a_duplicate(store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    code, new = run(path, "update", refs["fact"], "--metadata", '{"checked": true}', "--tenant", "acme")
    assert code == 0 and new["supersedes"] == refs["fact"] and new["created"] is True
    assert "duplicate_of" not in new or new["duplicate_of"] is None
    table = runner.invoke(app, ["update", new["ref"], "--metadata", '{"checked": false}', "--tenant", "acme",
                                "--data-dir", str(path)])
    assert table.exit_code == 0 and "duplicate" not in table.stdout.lower()


def test_end_revive_history_and_as_of_from_the_command_line(store: tuple[Path, dict[str, str]]) -> None:
    path, refs = store
    before = "2000-01-01T00:00:00+00:00"
    code, new = run(path, "update", refs["fact"], "the build uses node 20", "--tenant", "acme", "--agent", "bob")
    code, ended = run(path, "end", new["ref"], "the build moved to bun", "--tenant", "acme", "--agent", "ops")
    assert code == 0 and ended["changed"] is True and ended["reason"] == "the build moved to bun"
    code, hist = run(path, "history", new["ref"], "--tenant", "acme")
    lives = [v["ended_by"] for v in hist["versions"]]
    assert lives == [f"corrected by {new['ref']} (bob)", "ended: the build moved to bun (by ops)"]
    code, rows = run(path, "recall", "build node", "--tenant", "acme")
    assert code == 0 and rows["messages"] == []
    code, then = run(path, "recall", "build node", "--tenant", "acme", "--as-of", hist["versions"][1]["timestamp"])
    assert [r["ref"] for r in then["messages"]] == [new["ref"]]
    code, none = run(path, "recall", "build node", "--tenant", "acme", "--as-of", before)
    assert code == 0 and none["messages"] == []
    code, shown = run(path, "show", new["ref"], "--tenant", "acme", "--as-of", hist["versions"][0]["timestamp"])
    assert code == 0 and shown["memory"]["ref"] == refs["fact"]
    code, _ = run(path, "recall", "build", "--tenant", "acme", "--as-of", "tomorrow")
    assert code != 0
    code, revived = run(path, "revive", new["ref"], "--tenant", "acme")
    assert code == 0 and revived["changed"] is True
    code, rows = run(path, "recall", "build node", "--tenant", "acme")
    assert [r["ref"] for r in rows["messages"]] == [new["ref"]]
    table = runner.invoke(app, ["history", new["ref"], "--tenant", "acme", "--data-dir", str(path)])
    assert table.exit_code == 0 and "corrected by" in table.stdout
