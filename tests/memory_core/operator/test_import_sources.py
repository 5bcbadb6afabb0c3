"""Moving in from other tools (issue 42): the MCP memory server, basic-memory, mem0 and plain Markdown,
through the library (memory_core.importers.import_source) and the CLI (memory-core import --from).

The fixtures under tests/fixtures/import are shaped like each tool's real files: unicode, a
~15,000-character observation, relations to entities the file never defines, entities that differ
only in case, notes without front matter, mem0 exports with and without hashes and zones.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.errors import NotFoundError
from memory_core.importers import import_source
from memory_core.operator.doctor.run import check_stores
from memory_core.operator.transfer import export_tenant
from memory_core.settings import load_settings
from testbed.paths import ROOT
from tests.support.agreement import assert_stores_agree
from tests.support.backends import open_core, store_backends
from tools.cli.app import app

FIXTURES = ROOT / "tests" / "fixtures" / "import"
MCP = FIXTURES / "mcp-memory" / "memory.json"
runner = CliRunner()


@pytest.fixture(params=store_backends("memory", "postgres"))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core(str(request.param), tmp_path / "data", request)
    yield core
    core.close()


@pytest.fixture
def sqlite_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def rows(core: MemoryCore, tenant: str = "acme") -> list[dict[str, Any]]:
    return list(export_tenant(core.operator_parts(), tenant))


def related_names(core: MemoryCore, name: str, tenant: str = "acme") -> dict[str, str]:
    """Entity name -> how the walk reached it (RELATED:<label> or MENTIONS…), for entities near ``name``."""
    found = core.related(tenant, name, depth=1, limit=50)
    return {item.entity.name: str(item.path[-1].via) for item in found.items if item.entity is not None}


# ---- MCP memory server -------------------------------------------------------------------------------

@pytest.mark.slow
def test_an_mcp_memory_graph_imports_and_recall_and_related_find_what_it_knew(store: MemoryCore) -> None:
    report = import_source(store.operator_parts(), "mcp-memory", MCP, "acme")
    assert (report.errors, report.written, report.skipped) == (0, 17, 0)
    assert report.by_kind == {"observation": {"read": 11, "written": 11, "skipped": 0},
                              "entity": {"read": 1, "written": 1, "skipped": 0},
                              "relation": {"read": 5, "written": 5, "skipped": 0}}
    top = store.recall("acme", "who leads the payments team").messages[0]
    assert top.content == "Alice Chen: Leads the payments team" and top.session == "mcp-memory:memory"
    assert "alice chen: Birthday is on 3 March" in [m.content for m in store.recall("acme", "birthday").messages]
    assert related_names(store, "Alice Chen").items() >= {"Acme Corp": "RELATED:works_at",
                                                          "José Müller": "RELATED:manages"}.items()
    assert related_names(store, "josé müller").items() >= {"Ledger Service": "RELATED:owns",
                                                           "東京オフィス": "RELATED:works_from"}.items()
    kinds = {e.name: e.kind for e in store.list_entities("acme")}
    assert kinds["Alice Chen"] == "person" and kinds["Acme Corp"] == "organization"
    assert kinds["Ledger Service"] == "software_project" and kinds["東京オフィス"] == "location"
    assert kinds["Payments Gateway"] is None  # a relation's end the file never defines
    assert "alice chen" not in kinds  # the same entity as Alice Chen here (names match without case)
    alice = next(e for e in store.list_entities("acme") if e.name == "Alice Chen")
    assert alice.mentions >= 6  # four observations (both spellings) and two relations
    long = next(r for r in rows(store) if r["content"].startswith("Ledger Service: Quarterly planning"))
    assert len(long["content"]) > 14_000 and long["metadata"]["mcp-memory"]["entityType"] == "Software Project"
    assert check_stores(store.operator_parts()).ok
    assert_stores_agree(store)


def test_importing_the_same_memory_json_again_adds_nothing(sqlite_store: MemoryCore) -> None:
    import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme")
    before = rows(sqlite_store)
    again = import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme")
    assert (again.written, again.skipped, again.errors) == (0, 17, 0)
    assert rows(sqlite_store) == before


def test_a_newer_memory_json_adds_only_what_is_new(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme")
    newer = tmp_path / "memory.json"
    newer.write_text(MCP.read_text(encoding="utf-8") + json.dumps(
        {"type": "entity", "name": "Acme Corp", "entityType": "organization",
         "observations": ["Opened an office in Lisbon"]}) + "\n", encoding="utf-8")
    report = import_source(sqlite_store.operator_parts(), "mcp-memory", newer, "acme")
    assert (report.written, report.skipped) == (1, 17)


def test_the_import_reaches_no_other_tenant(sqlite_store: MemoryCore) -> None:
    import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme")
    assert sqlite_store.recall("globex", "payments team").messages == []
    with pytest.raises(NotFoundError):
        sqlite_store.related("globex", "Alice Chen")
    assert sqlite_store.list_entities("globex") == []
    # acme's keys are not globex's
    dry = import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "globex", dry_run=True)
    assert (dry.written, dry.skipped) == (17, 0)


def broken_mcp(tmp_path: Path) -> Path:
    path = tmp_path / "memory.json"
    lines = [
        json.dumps({"type": "entity", "name": "Ok One", "entityType": "thing", "observations": ["first fine fact"]}),
        json.dumps({"type": "entity", "name": "Ok Two", "entityType": "thing", "observations": ["second fine fact"]}),
        "{not json",
        json.dumps({"type": "entity", "entityType": "thing", "observations": ["no name"]}),
        json.dumps({"type": "relation", "from": "Ok One", "to": "Ok Two"}),
        json.dumps({"type": "entity", "name": "Ok Three", "entityType": "thing", "observations": ["x" * 100_001]}),
        json.dumps({"type": "entity", "name": "Ok Four", "entityType": "thing", "observations": ["fourth fact", 7]}),
    ]
    path.write_bytes(("\n".join(lines) + "\n").encode() + b'{"type": "entity", "name": "Bad \xff"}\n')
    return path


def test_malformed_input_stops_the_import_naming_file_line_and_field(sqlite_store: MemoryCore,
                                                                     tmp_path: Path) -> None:
    report = import_source(sqlite_store.operator_parts(), "mcp-memory", broken_mcp(tmp_path), "acme")
    assert report.written == 2 and report.errors == 1
    assert report.stopped_at == {"file": "memory.json", "line": 3, "field": None}
    assert report.error_items[0]["message"].startswith("Not JSON")
    assert sorted(r["content"] for r in rows(sqlite_store)) == ["Ok One: first fine fact", "Ok Two: second fine fact"]


def test_skip_bad_imports_every_good_item_and_lists_the_rest(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    report = import_source(sqlite_store.operator_parts(), "mcp-memory", broken_mcp(tmp_path), "acme", skip_bad=True)
    refused = [(e["line"], e["field"], e["code"]) for e in report.error_items]
    assert refused == [(3, None, "INVALID_INPUT"), (4, "name", "INVALID_INPUT"), (5, "relationType", "INVALID_INPUT"),
                       (6, "observations[0]", "CONTENT_TOO_LARGE"), (7, "observations[1]", "INVALID_INPUT"),
                       (8, None, "INVALID_INPUT")]
    assert "UTF-8" in report.error_items[-1]["message"]
    assert report.stopped_at is None and report.written == 3
    assert "Ok Four: fourth fact" in [r["content"] for r in rows(sqlite_store)]


def test_a_dry_run_writes_nothing_and_reports_counts_and_the_first_rows(sqlite_store: MemoryCore,
                                                                       tmp_path: Path) -> None:
    report = import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme", dry_run=True)
    assert rows(sqlite_store) == [] and sqlite_store.list_entities("acme") == []
    assert (report.written, report.entities, report.relations, report.sessions) == (17, 6, 5, 1)
    assert [s["content"] for s in report.sample[:2]] == ["Alice Chen: Leads the payments team",
                                                         "Alice Chen: Prefers async standups over meetings"]
    assert report.sample[0]["entities"] == ["Alice Chen"] and len(report.sample) == 5
    broken = import_source(sqlite_store.operator_parts(), "mcp-memory", broken_mcp(tmp_path), "acme", dry_run=True)
    assert broken.errors == 6 and broken.stopped_at is None and rows(sqlite_store) == []
    import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme")
    again = import_source(sqlite_store.operator_parts(), "mcp-memory", MCP, "acme", dry_run=True)
    assert (again.written, again.skipped, again.sample) == (0, 17, [])


# ---- basic-memory --------------------------------------------------------------------------------------

@pytest.mark.slow
def test_basic_memory_notes_become_sessions_typed_observations_and_declared_relations(store: MemoryCore) -> None:
    report = import_source(store.operator_parts(), "basic-memory", FIXTURES / "basic-memory", "acme")
    assert report.errors == 0 and report.sessions == 3
    assert report.by_kind["observation"]["written"] == 9 and report.by_kind["relation"]["written"] == 7
    by_content = {r["content"]: r for r in rows(store)}
    fts = by_content["Use SQLite FTS5 for the lexical index #search #sqlite (decided in the January review)"]
    assert (fts["type"], fts["session"]) == ("decision", "specs/search-design")
    meta = fts["metadata"]["basic-memory"]
    assert (meta["title"], meta["permalink"], meta["tags"], meta["category"]) == (
        "Search Design", "specs/search-design", ["search", "architecture"], "decision")
    assert meta["observation_tags"] == ["search", "sqlite"] and meta["context"] == "decided in the January review"
    assert meta["created"] == "2025-11-02T09:30:00+00:00"
    assert fts["timestamp"].startswith("2026-01-15T16:45:00")  # the note's modified time, in UTC
    assert by_content["[ ] write the migration guide"]["type"] == "note"  # a task, not an observation
    assert by_content["[12:30] standup note that is not a category"]["type"] == "note"
    assert by_content["Search Design owned by Ana Lima"]["metadata"]["basic-memory"]["relation"]["type"] == "owned by"
    near = related_names(store, "Search Design")
    assert near["Search Requirements"] == "RELATED:implements" and near["Storage Layer"] == "RELATED:depends_on"
    assert near["Legacy Search"] == "RELATED:links_to" and near["Ana Lima"] in ("RELATED:owned by",
                                                                                  "RELATED:mentors")
    labels = {(r["content"], rel["label"]) for r in rows(store) for rel in r["relations"]}
    assert ("Search Design owned by Ana Lima", "links_to") not in labels  # an explicit relation is not also a link
    kinds = {e.name: e.kind for e in store.list_entities("acme")}
    assert kinds["Search Design"] == "spec" and kinds["Ana Lima"] == "person"
    assert kinds["Platform Roadmap"] == "note"  # title from its first heading: the notes linking it find it
    assert "Søren Kierkegaard-Hansen" in kinds
    assert all(".basic-memory" not in str(r["metadata"]) for r in rows(store))
    assert (import_source(store.operator_parts(), "basic-memory", FIXTURES / "basic-memory", "acme").written) == 0
    assert check_stores(store.operator_parts()).ok


# ---- mem0 -----------------------------------------------------------------------------------------------

def test_mem0_memories_keep_their_user_agent_run_metadata_and_times(sqlite_store: MemoryCore) -> None:
    report = import_source(sqlite_store.operator_parts(), "mem0", FIXTURES / "mem0" / "get_all.json", "acme")
    assert (report.errors, report.written) == (0, 7)
    got = {(r["content"], r["session"]): r for r in rows(sqlite_store)}
    seats = got["Prefers window seats on long flights", "trip-2026-03"]
    assert seats["agent"] == "travel-bot" and seats["type"] == "fact"
    assert seats["timestamp"] == "2026-02-20T16:15:30.123456+00:00"
    assert seats["metadata"]["source"] == "chat" and seats["metadata"]["confidence"] == 0.9
    own = seats["metadata"]["mem0"]
    assert own["id"] == "0b6f1c9e-3f0a-4f7e-9a63-1d1b5a0c7e01" and own["categories"] == ["travel", "preferences"]
    assert ("Prefers window seats on long flights", "user:bob") in got  # the same text for another user is kept
    assert got["Allergic to peanuts", "user:alice"]["agent"] == "mem0"
    zurich = got["Lives in Zürich and commutes by tram 🚋", "user:alice"]
    assert zurich["timestamp"] == "2026-01-07T10:00:00.000000+00:00"  # no zone: UTC
    assert "hash" not in zurich["metadata"]["mem0"]  # never computed here: a hash of the clear text is not kept
    near = {name.casefold(): via for name, via in related_names(sqlite_store, "alice").items()}
    assert near["zürich"] == "RELATED:lives_in"
    jsonl = import_source(sqlite_store.operator_parts(), "mem0", FIXTURES / "mem0" / "memories.jsonl", "acme")
    assert (jsonl.written, jsonl.skipped) == (0, 2)  # the same memories, one a line: nothing new


def test_a_mem0_export_names_the_line_and_field_of_a_bad_memory(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    path = tmp_path / "export.json"
    path.write_text(json.dumps({"results": [{"id": "a", "memory": "fine"}, {"id": "b", "memory": ""},
                                            {"id": "c", "memory": "bad time", "created_at": "yesterday"}]},
                               indent=2), encoding="utf-8")
    report = import_source(sqlite_store.operator_parts(), "mem0", path, "acme", skip_bad=True)
    assert [(e["line"], e["field"]) for e in report.error_items] == [(7, "memory"), (11, "created_at")]
    assert report.written == 1


# ---- markdown -------------------------------------------------------------------------------------------

def test_markdown_headings_become_sessions_and_blocks_memories(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    notes = shutil.copytree(FIXTURES / "markdown", tmp_path / "markdown")  # its own vault (no .git above it)
    report = import_source(sqlite_store.operator_parts(), "markdown", notes, "acme")
    assert report.errors == 0
    sessions: dict[str, list[str]] = {}
    for r in rows(sqlite_store):
        sessions.setdefault(r["session"], []).append(r["content"])
    assert sessions["claude/code-style"] == ["Type hints everywhere; `mypy` must stay clean.",
                                             "Line length 120, enforced by ruff.",
                                             "Prefer dataclasses inside the core, pydantic only at the boundaries."]
    assert sessions["claude/commands"][0].startswith("```bash\nmake install")
    assert sessions["claude/commands"][1].startswith("| command | what it does |")
    assert "Unicode names like Zoë and 北京 must round-trip." in sessions["claude/gotchas"]
    assert sessions["notes-decisions"] == ["Loose notes before any heading go to the file's own session."]
    assert len(sessions["notes-decisions/decisions"]) == 2
    first = rows(sqlite_store)[0]
    assert first["metadata"]["markdown"] == {"file": "CLAUDE.md", "title": "Project conventions",
                                             "headings": ["Project conventions"]}
    assert report.by_kind.keys() == {"paragraph", "item", "code", "table"}
    recalled = sqlite_store.recall("acme", "which tool enforces the line length").messages
    assert recalled[0].content == "Line length 120, enforced by ruff."
    assert import_source(sqlite_store.operator_parts(), "markdown", notes, "acme").written == 0


def test_an_edited_markdown_file_adds_only_its_new_blocks(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    claude = tmp_path / "CLAUDE.md"
    shutil.copy(FIXTURES / "markdown" / "CLAUDE.md", claude)
    first = import_source(sqlite_store.operator_parts(), "markdown", claude, "acme")
    claude.write_text(claude.read_text(encoding="utf-8") + "\n- Never commit to main.\n", encoding="utf-8")
    again = import_source(sqlite_store.operator_parts(), "markdown", claude, "acme")
    assert (again.written, again.skipped) == (1, first.written)


# ---- the CLI ---------------------------------------------------------------------------------------------

@pytest.fixture
def cli_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")


def cli(data_dir: Path, *args: str) -> Any:
    return runner.invoke(app, ["import", *args, "--data-dir", str(data_dir)])


@pytest.mark.parametrize(("source", "path", "written"), [
    ("mcp-memory", MCP, 17), ("basic-memory", FIXTURES / "basic-memory", 22),
    ("mem0", FIXTURES / "mem0" / "get_all.json", 7), ("markdown", FIXTURES / "markdown", 12)])
def test_the_cli_moves_each_source_in_with_one_command(source: str, path: Path, written: int, tmp_path: Path,
                                                      cli_env: None) -> None:
    data_dir = tmp_path / "data"
    dry = cli(data_dir, str(path), "--from", source, "-t", "acme", "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stdout
    assert json.loads(dry.stdout)["written"] == written and json.loads(dry.stdout)["dry_run"] is True
    done = cli(data_dir, str(path), "--from", source, "-t", "acme", "--agent", "claude", "--json")
    assert done.exit_code == 0, done.stdout
    out = json.loads(done.stdout)
    assert (out["written"], out["errors"], out["agent"]) == (written, 0, "claude")
    human = cli(data_dir, str(path), "--from", source, "-t", "acme")
    assert human.exit_code == 0 and f"0 memories written, {written} already present" in " ".join(human.stdout.split())
    with MemoryCore.open(data_dir, settings=load_settings()) as core:
        assert len(rows(core)) == written


def test_the_cli_refuses_an_unknown_source_and_a_missing_path(tmp_path: Path, cli_env: None) -> None:
    unknown = cli(tmp_path / "data", str(MCP), "--from", "notion", "-t", "acme", "--json")
    assert unknown.exit_code == 2 and json.loads(unknown.stdout)["error"]["code"] == "INVALID_INPUT"
    missing = cli(tmp_path / "data", str(tmp_path / "nope.json"), "--from", "mcp-memory", "-t", "acme", "--json")
    assert missing.exit_code == 3 and json.loads(missing.stdout)["error"]["code"] == "NOT_FOUND"


def test_the_cli_lists_what_it_refused_and_where_it_stopped(tmp_path: Path, cli_env: None) -> None:
    result = cli(tmp_path / "data", str(broken_mcp(tmp_path)), "--from", "mcp-memory", "-t", "acme")
    assert result.exit_code == 1
    text = " ".join(result.stdout.split())
    assert "memory.json" in text and "Not JSON" in text and "Stopped at memory.json:3" in text and "--skip-bad" in text


def test_timestamps_of_markdown_follow_the_file(sqlite_store: MemoryCore, tmp_path: Path) -> None:
    note = tmp_path / "notes.md"
    note.write_text("# Log\n\nfirst\n\nsecond\n", encoding="utf-8")
    when = datetime(2025, 6, 1, 12, 0, tzinfo=UTC).timestamp()
    import os

    os.utime(note, (when, when))
    import_source(sqlite_store.operator_parts(), "markdown", note, "acme")
    assert [r["timestamp"] for r in rows(sqlite_store)] == ["2025-06-01T12:00:00.000000+00:00",
                                                            "2025-06-01T12:00:00.000001+00:00"]
