"""What an import says it did (issue 47.10): redacted secrets counted as an add counts them, entities the
extractor found counted, one bad byte costing its block and not its note, a YAML error naming its line,
an entity type kept recognisable, and a dry run that leaves no store behind.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.importers import import_source
from memory_core.operator.transfer import export_tenant
from testbed.paths import ROOT
from tests.support.backends import open_core
from tools.cli.app import app

FIXTURES = ROOT / "tests" / "fixtures" / "import"
SERVER = FIXTURES / "mcp-memory" / "server-2026.8.31"


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")


def rows(core: MemoryCore, tenant: str = "acme") -> list[dict[str, Any]]:
    return list(export_tenant(core.operator_parts(), tenant))


def test_redacted_secrets_are_counted_as_an_add_counts_them(store: MemoryCore, tmp_path: Path) -> None:
    notes = tmp_path / "ops.md"
    notes.write_text("# Ops\n\nThe staging password: hunter2\n\nDB_PASSWORD=s3cr3t-value and token ghp_"
                     + "a" * 36 + "\n\nNothing secret here.\n", encoding="utf-8")
    dry = import_source(store.operator_parts(), "markdown", notes, "acme", dry_run=True)
    done = import_source(store.operator_parts(), "markdown", notes, "acme")
    assert done.redacted == dry.redacted and sum(done.redacted.values()) >= 3
    assert done.redacted.get("password") == 2
    added = store.add_memory("acme", "s", "a", "The staging password: hunter2", type="note")
    assert added.redacted == {"password": 1}  # the same words, the same count


def test_entities_the_extractor_finds_are_counted(store: MemoryCore) -> None:
    report = import_source(store.operator_parts(), "mem0", FIXTURES / "mem0" / "get_all.json", "acme", dry_run=True)
    assert report.entities > 2  # Zürich, Tokyo, the graph's ends…: not 0
    done = import_source(store.operator_parts(), "mem0", FIXTURES / "mem0" / "get_all.json", "acme")
    assert done.entities == report.entities == len(store.list_entities("acme"))


@pytest.mark.parametrize("source", ["markdown", "basic-memory"])
def test_skip_bad_skips_the_block_with_a_bad_byte_and_keeps_the_note(store: MemoryCore, tmp_path: Path,
                                                                     source: str) -> None:
    note = tmp_path / "notes" / "team.md"
    note.parent.mkdir()
    note.write_bytes(b"---\ntitle: Team\npermalink: team\n---\n# Team\n\n- [fact] Dana leads the team\n"
                     b"- [fact] bad byte \xff here\n- [fact] Ana joined in May\n")
    report = import_source(store.operator_parts(), source, tmp_path / "notes", "acme", skip_bad=True)
    assert [(e["file"], e["line"]) for e in report.error_items] == [("team.md", 8)]
    assert "byte 0xff" in report.error_items[0]["message"] and report.written == 2
    stopped = import_source(store.operator_parts(), source, tmp_path / "notes", "globex")
    assert stopped.written == 1 and stopped.stopped_at == {"file": "team.md", "line": 8, "field": None}


def test_a_yaml_error_names_the_line_of_the_unclosed_bracket(store: MemoryCore, tmp_path: Path) -> None:
    note = tmp_path / "notes" / "spec.md"
    note.parent.mkdir()
    note.write_text("---\ntitle: Spec\ntype: spec\ntags: [search, ranking\npermalink: spec\n---\n# Spec\n")
    report = import_source(store.operator_parts(), "basic-memory", tmp_path / "notes", "acme", skip_bad=True)
    assert [(e["line"], e["field"]) for e in report.error_items] == [(4, "front matter")]
    assert "(line 4)" in report.error_items[0]["message"]


def test_an_entity_type_with_a_slash_keeps_its_words_and_says_so(store: MemoryCore) -> None:
    report = import_source(store.operator_parts(), "mcp-memory", SERVER / "memory.jsonl", "acme")
    kinds = {e.name: e.kind for e in store.list_entities("acme")}
    assert kinds["Data Platform"] == "team_group"
    assert any("'team/group'" in n["message"] and "team_group" in n["message"] for n in report.notes)


def test_a_dry_run_creates_no_store(tmp_path: Path, cli_env: None) -> None:
    data_dir = tmp_path / "nothing-here"
    for args in (["--from", "mcp-memory", str(SERVER / "memory.jsonl")], [str(tmp_path / "empty.jsonl")]):
        (tmp_path / "empty.jsonl").write_text("")
        result = CliRunner().invoke(app, ["import", *args, "-t", "acme", "--dry-run", "--json",
                                          "--data-dir", str(data_dir)])
        assert result.exit_code == 0, result.stdout
        assert json.loads(result.stdout)["dry_run"] is True
        assert not data_dir.exists()


def test_an_import_while_agents_hold_the_store_says_what_to_do(tmp_path: Path, cli_env: None) -> None:
    from memory_core.dir_lock import claim

    data_dir = tmp_path / "data"
    held = claim(data_dir)  # what a running server (the agents' shared one, or serve --http) holds
    try:
        result = CliRunner().invoke(app, ["import", str(SERVER / "memory.jsonl"), "--from", "mcp-memory",
                                          "-t", "acme", "--json", "--data-dir", str(data_dir)])
    finally:
        held.release()
    error = json.loads(result.stdout)["error"]
    assert result.exit_code == 4 and error["code"] == "STORE_LOCKED"
    assert "stop the agents" in error["message"] and "run the import again" in error["message"]
    assert "docs/import.md" in error["message"]
