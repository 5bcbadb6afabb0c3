"""``memory-core entities`` (list, merge) through Typer's runner on a real store (embedded Chroma)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings
from tools.cli.app import app

runner = CliRunner()


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in [k for k in os.environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings()) as core:
        core.add_memory("acme", "s1", "ann", "the gateway timed out", entities=[
            {"name": "Payments API", "kind": "service", "aliases": ["payments-api"]},
            {"name": "Alice", "kind": "person"}])
        core.add_memory("acme", "s1", "bob", "she restarted it", entities=[{"name": "payments svc"}, {"name": "alice"}])
        core.add_memory("acme", "s1", "ann", "private", visibility="agent", entities=[{"name": "Falcon"}])
        core.add_memory("globex", "g1", "zed", "x", entities=[{"name": "Globex Only"}])
    return path


def _json(data_dir: Path, *args: str, code: int = 0) -> Any:
    result = runner.invoke(app, [*args, "--data-dir", str(data_dir), "--json"])
    assert result.exit_code == code, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def test_entities_lists_names_kinds_aliases_and_mention_counts_of_one_tenant(data_dir: Path) -> None:
    listed = _json(data_dir, "entities", "--tenant", "acme")
    by_name = {e["name"]: e for e in listed["entities"]}
    assert listed["tenant"] == "acme" and set(by_name) == {"Payments API", "Alice", "payments svc"}
    assert by_name["Alice"]["mentions"] == 2 and by_name["Alice"]["kind"] == "person"
    assert by_name["Payments API"]["aliases"] == ["Payments API", "payments-api"]
    assert listed["entities"][0]["name"] == "Alice"  # most mentioned first
    assert "Falcon" in {e["name"] for e in _json(data_dir, "entities", "--tenant", "acme", "--viewer", "ann")
                        ["entities"]}


def test_entities_as_a_table_shows_each_entity(data_dir: Path) -> None:
    result = runner.invoke(app, ["entities", "--tenant", "acme", "--data-dir", str(data_dir)])
    assert result.exit_code == 0 and "payments-api" in result.stdout and "Globex" not in result.stdout


def test_entities_merge_folds_one_entity_into_another(data_dir: Path) -> None:
    merged = _json(data_dir, "entities", "merge", "payments-api", "Payments SVC", "--tenant", "acme")
    assert merged["kept"]["aliases"] == ["Payments API", "payments-api", "payments svc"]
    listed = {e["name"]: e["mentions"] for e in _json(data_dir, "entities", "--tenant", "acme")["entities"]}
    assert listed == {"Payments API": 2, "Alice": 2}


def test_entities_needs_a_tenant_and_a_merge_of_unknown_names_is_not_found(data_dir: Path) -> None:
    assert _json(data_dir, "entities", code=2)["error"]["code"] == "TENANT_REQUIRED"
    missing = _json(data_dir, "entities", "merge", "Alice", "Globex Only", "--tenant", "acme", code=3)
    assert missing["error"]["code"] == "NOT_FOUND"


def test_entities_help_has_an_example() -> None:
    for args in (["entities", "--help"], ["entities", "merge", "--help"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0 and "Example: memory-core entities" in " ".join(result.stdout.split())
