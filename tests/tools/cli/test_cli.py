"""The operator CLI through Typer's runner, on a populated temporary store (embedded Chroma)."""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.settings import load_settings, template_text
from testbed.paths import ROOT
from tests.support.agreement import assert_stores_agree
from tests.support.sqlite import sqlite_db
from tools.cli.app import app

runner = CliRunner()
T0 = "2026-02-01T08:00:00.000000+00:00"
COMMANDS = ["add", "recall", "show", "recent", "delete", "tenants", "sessions", "stats", "graph", "export",
            "import", "doctor", "init", "serve", "summarize"]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A store with two tenants: acme (3 sessions, turns sharing timestamps, handoffs) and globex."""
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings()) as core:
        for i in range(7):
            core.add_memory("acme", "s1", ["alice", "bob"][i % 2], f"turn {i}: the apple harvest, step {i}",
                            role="user", timestamp=T0 if i < 4 else None)
        core.create_handoff("acme", "s1", "bob", "handoff: apples picked, cider next")
        core.add_memory("acme", "s2", "carol", "decided to ship cider on friday", type="decision",
                        channel="slack", source={"id": "slack:C1"}, project_id="cider")
        core.add_memory("acme", "s3", "carol", "private pear notes", type="note", visibility="agent")
        core.add_memory("globex", "g1", "zed", "globex secret apple formula")
    yield path


def run(data_dir: Path | None, *args: str, input: str | None = None) -> Any:
    extra = ["--data-dir", str(data_dir)] if data_dir is not None else []
    return runner.invoke(app, [*args, *extra], input=input)


def run_json(data_dir: Path, *args: str, code: int = 0, input: str | None = None) -> Any:
    result = run(data_dir, *args, "--json", input=input)
    assert result.exit_code == code, (result.stdout, result.stderr)
    return json.loads(result.stdout)


def help_text(command: str) -> str:
    result = runner.invoke(app, [command, "--help"])
    assert result.exit_code == 0
    return " ".join(result.stdout.split())  # Rich wraps at 80 columns


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_help_with_an_example(command: str) -> None:
    assert f"Example: memory-core {command}" in help_text(command)


def test_tenants_and_doctor_say_they_are_operator_wide() -> None:
    for command in ("tenants", "doctor"):
        assert "Operator-wide by design" in help_text(command)


@pytest.mark.slow
def test_add_then_show_round_trips_every_field(data_dir: Path) -> None:
    added = run_json(data_dir, "add", "-t", "acme", "-s", "s4", "-a", "dave", "--type", "note", "--role", "user",
                     "--channel", "cli", "--source-id", "cli:1", "--project-id", "cider", "--salience", "0.8",
                     "--metadata", '{"k": [1, 2]}', "--timestamp", T0, "--idempotency-key", "k1", "remember the crates")
    assert added["created"] is True and added["timestamp"] == T0
    again = run_json(data_dir, "add", "-t", "acme", "-s", "s4", "-a", "dave", "--idempotency-key", "k1", "remember")
    assert (again["ref"], again["created"]) == (added["ref"], False)
    shown = run_json(data_dir, "show", added["ref"], "-t", "acme")
    memory = shown["memory"]
    assert {k: memory[k] for k in ("type", "role", "channel", "source", "project_id", "salience", "metadata",
                                   "content")} == {
        "type": "note", "role": "user", "channel": "cli", "source": {"id": "cli:1"}, "project_id": "cider",
        "salience": 0.8, "metadata": {"k": [1, 2]}, "content": "remember the crates"}
    assert shown["neighbours"]["author"]["agent"] == "dave"
    human = run(data_dir, "show", added["ref"], "-t", "acme")
    assert human.exit_code == 0 and "remember the crates" in human.stdout and "agent:acme/dave" in human.stdout


def test_add_reads_content_from_standard_input(data_dir: Path) -> None:
    added = run_json(data_dir, "add", "-", "-t", "acme", "-s", "s5", "-a", "eve", input="multi\nline content\n")
    assert run_json(data_dir, "show", added["ref"], "-t", "acme")["memory"]["content"] == "multi\nline content\n"


def test_a_handoff_added_from_the_cli_supersedes_the_previous_one(data_dir: Path) -> None:
    added = run_json(data_dir, "add", "-t", "acme", "-s", "s1", "-a", "bob", "--type", "handoff", "handoff two")
    edges = run_json(data_dir, "show", added["ref"], "-t", "acme")["neighbours"]["edges"]
    assert any(e["kind"] == "SUPERSEDES" for e in edges)


@pytest.mark.slow
def test_recall_applies_every_filter_and_shows_scores(data_dir: Path) -> None:
    rows = run_json(data_dir, "recall", "apple harvest", "-t", "acme", "--limit", "3")["messages"]
    assert len(rows) == 3 and all(r["tenant"] == "acme" and "confidence" in r for r in rows)
    assert all(r["match_reason"]["signal"] for r in rows)
    only = run_json(data_dir, "recall", "cider", "-t", "acme", "--type", "decision", "--session", "s2", "--agent",
                    "carol", "--channel", "slack", "--source-id", "slack:", "--project-id", "cider", "--deep")
    assert [r["content"] for r in only["messages"]] == ["decided to ship cider on friday"]
    assert only["resolved_project_id"] == "cider"
    global_pool = run_json(data_dir, "recall", "cider", "-t", "acme", "--project-id", "")["messages"]
    assert global_pool and all(m["project_id"] is None for m in global_pool)
    excluded = run_json(data_dir, "recall", "cider", "-t", "acme", "--exclude", "decided to ship")["messages"]
    assert "decided to ship cider on friday" not in [r["content"] for r in excluded]
    hidden = run_json(data_dir, "recall", "pear notes", "-t", "acme")["messages"]
    private = run_json(data_dir, "recall", "pear notes", "-t", "acme", "--viewer", "carol")["messages"]
    assert "private pear notes" not in [r["content"] for r in hidden]
    assert private[0]["content"] == "private pear notes"
    table = run(data_dir, "recall", "apple", "-t", "acme")
    assert table.exit_code == 0 and "confidence" in table.stdout and "mem:" in table.stdout


def test_recall_says_when_its_rows_are_newest_first_rather_than_ranked(data_dir: Path) -> None:
    newer = run_json(data_dir, "add", "-t", "acme", "-s", "s1", "-a", "bob", "--type", "handoff",
                     "handoff: cider pressed, bottling next")["ref"]
    query = ["recall", "apples picked, cider next", "-t", "acme"]
    handoffs = run_json(data_dir, *query, "--type", "handoff")
    assert handoffs["order"] == "newest_first" and handoffs["messages"][0]["ref"] == newer  # the library's word
    table = run(data_dir, *query, "--type", "handoff")
    assert table.exit_code == 0, table.stdout
    assert "recall: 2 rows, newest first" in table.stdout
    assert ("Newest first: under --type handoff, time orders the rows that pass the quality gate; "
            "confidence is why a row passed, not a ranking (--deep ranks by relevance).") in table.stdout
    ranked = run(data_dir, *query)
    assert "rows by confidence" in ranked.stdout and "newest first" not in ranked.stdout.lower()
    assert "order" not in run_json(data_dir, *query)
    deep = run(data_dir, *query, "--type", "handoff", "--deep")
    assert "rows by confidence" in deep.stdout and "order" not in run_json(data_dir, *query, "--type", "handoff",
                                                                           "--deep")
    recent = run(data_dir, "recall", "", "-t", "acme", "-n", "3")
    assert "recall: 3 most recent, newest first" in recent.stdout


def test_recall_explain_prints_the_time_per_stage_and_the_pool(data_dir: Path) -> None:
    plain = run_json(data_dir, "recall", "apple harvest", "-t", "acme")
    assert "diagnostics" not in plain
    explained = run_json(data_dir, "recall", "apple harvest", "-t", "acme", "--explain")
    assert [r["ref"] for r in explained["messages"]] == [r["ref"] for r in plain["messages"]]
    diagnostics = explained["diagnostics"]
    assert {"read", "embed", "vector", "lexical", "entities", "wait", "rank"} <= set(diagnostics["stages_ms"])
    assert diagnostics["candidates"] >= len(explained["messages"]) and diagnostics["vector_path"] == "unfiltered"
    human = run(data_dir, "recall", "apple harvest", "-t", "acme", "--explain")
    assert human.exit_code == 0, human.stdout
    lines = human.stdout.splitlines()
    stages = next(line for line in lines if line.startswith("stages: "))
    assert re.match(r"stages: read [\d.]+ · embed [\d.]+ · vector [\d.]+ · wait [\d.]+ · rank [\d.]+ ms "
                    r"\(beside embed and vector: lexical [\d.]+, entities [\d.]+ ms\)$", stages), stages
    assert any(line.startswith("elapsed: ") for line in lines) and "vector_path: unfiltered" in lines


def test_recent_pages_with_the_printed_cursor_without_gaps_or_repeats(data_dir: Path) -> None:
    seen, cursor = [], None
    while True:
        args = ["recent", "-t", "acme", "-s", "s1", "--limit", "3"] + (["--cursor", cursor] if cursor else [])
        page = run_json(data_dir, *args)
        seen += [t["ref"] for t in page["turns"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 7
    human = run(data_dir, "recent", "-t", "acme", "-s", "s1", "--limit", "2")
    assert "next cursor:" in human.stdout


@pytest.mark.slow
def test_tenants_is_operator_wide_while_sessions_stats_and_graph_stay_in_one_tenant(data_dir: Path) -> None:
    tenants = {t["tenant"]: t for t in run_json(data_dir, "tenants")["tenants"]}
    assert set(tenants) == {"acme", "globex"} and tenants["acme"]["memories"] == 10
    sessions = {s["session"]: s for s in run_json(data_dir, "sessions", "-t", "acme")["sessions"]}
    assert set(sessions) == {"s1", "s2", "s3"}
    assert sessions["s1"]["turns"] == 7 and sessions["s1"]["latest_handoff"] is not None
    assert sessions["s1"]["first_activity"] == T0
    stats = run_json(data_dir, "stats", "-t", "acme")
    assert stats["by_type"] == {"decision": 1, "handoff": 1, "note": 1, "turn": 7}
    assert stats["private"] == 1 and stats["agents"] == ["alice", "bob", "carol"]
    assert stats["disk_bytes"]["graph_database"] > 0 and stats["disk_bytes"]["chroma_dir"] > 0
    handoff = sessions["s1"]["latest_handoff"]
    tree = run_json(data_dir, "graph", handoff, "-t", "acme", "--depth", "2")
    assert tree["node"] == handoff and {e["kind"] for e in tree["edges"]} >= {"AUTHORED_BY", "IN_SESSION"}
    assert "globex" not in json.dumps(tree)
    assert run_json(data_dir, "graph", handoff, "-t", "globex", code=3)["error"]["code"] == "NOT_FOUND"
    drawn = run(data_dir, "graph", handoff, "-t", "acme")
    assert drawn.exit_code == 0 and "AUTHORED_BY" in drawn.stdout and "session:acme/s1" in drawn.stdout
    for command in (["tenants"], ["sessions", "-t", "acme"], ["stats", "-t", "acme"]):
        assert run(data_dir, *command).exit_code == 0


@pytest.mark.parametrize("args", [
    ["recall", "apple"], ["show", "mem:1"], ["recent", "-s", "s1"], ["delete", "mem:1"], ["sessions"], ["stats"],
    ["graph", "mem:1"], ["export"], ["summarize", "-s", "s1"], ["add", "-s", "s1", "-a", "x", "text"],
])
def test_commands_that_read_tenant_data_fail_closed_without_a_tenant(data_dir: Path, args: list[str]) -> None:
    result = run(data_dir, *args, "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout) == {"error": {"code": "TENANT_REQUIRED",
                                                   "message": "A tenant is required on every call."}}
    human = run(data_dir, *args)
    assert human.exit_code == 2 and "TENANT_REQUIRED" in human.stderr


@pytest.mark.slow
def test_exit_codes_and_messages_name_the_stable_code(data_dir: Path, tmp_path: Path) -> None:
    assert run_json(data_dir, "show", "mem:999", "-t", "acme", code=3)["error"]["code"] == "NOT_FOUND"
    assert run_json(data_dir, "show", "nonsense", "-t", "acme", code=2)["error"]["code"] == "INVALID_REF"
    assert run_json(data_dir, "recent", "-t", "acme", "-s", "s1", "--cursor", "x.y", code=2)["error"]["code"] == (
        "INVALID_CURSOR")
    assert run_json(data_dir, "show", "mem:1", "-t", "globex", code=3)["error"]["code"] == "NOT_FOUND"
    bad = tmp_path / "bad.toml"
    bad.write_text("[recall]\npreview_chars = -1\n")
    result = run(data_dir, "tenants", "--config", str(bad))
    assert result.exit_code == 5 and "CONFIG_INVALID" in result.stderr and "recall.preview_chars" in result.stderr
    with MemoryCore.open(data_dir, settings=load_settings()):
        locked = run(data_dir, "tenants")
    assert locked.exit_code == 4 and "STORE_LOCKED" in locked.stderr
    assert runner.invoke(app, ["tenants", "--no-such-option"]).exit_code == 2


def test_the_operator_deletes_an_agents_private_memory(data_dir: Path) -> None:
    with MemoryCore.open(data_dir, settings=load_settings()) as core:
        [note] = core.recall("acme", "", viewer="carol", type="note").messages
    assert note.visibility == "agent"
    assert run_json(data_dir, "delete", note.ref, "-t", "acme") == {"ref": note.ref, "deleted": True}


@pytest.mark.slow
def test_delete_removes_a_memory_and_a_second_delete_is_not_found(data_dir: Path) -> None:
    assert run_json(data_dir, "delete", "mem:1", "-t", "acme") == {"ref": "mem:1", "deleted": True}
    assert run_json(data_dir, "delete", "mem:1", "-t", "acme", code=3)["error"]["code"] == "NOT_FOUND"
    assert run_json(data_dir, "delete", "mem:11", "-t", "acme", code=3)["error"]["code"] == "NOT_FOUND"  # globex's


@pytest.mark.slow
def test_summarize_shows_where_the_summary_came_from(data_dir: Path) -> None:
    episode = run_json(data_dir, "summarize", "-t", "acme", "-s", "s1")
    assert episode["ref"].startswith("ep:") and episode["summary_source"] == "fallback" and episode["summary"]
    human = run(data_dir, "summarize", "-t", "acme", "-s", "s1")
    assert human.exit_code == 0 and "source: fallback" in human.stdout
    assert run_json(data_dir, "summarize", "-t", "acme", "-s", "nope", code=3)["error"]["code"] == "NOT_FOUND"


def export_lines(data_dir: Path, tenant: str) -> list[dict[str, Any]]:
    result = run(data_dir, "export", "-t", tenant)
    assert result.exit_code == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.slow
def test_export_then_import_into_an_empty_store_is_identical_and_reimport_writes_nothing(
    data_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "acme.jsonl"
    assert run_json(data_dir, "export", "-t", "acme", "--out", str(out)) == {
        "tenant": "acme", "exported": 10, "out": str(out)}
    assert [json.loads(line) for line in out.read_text().splitlines()] == export_lines(data_dir, "acme")
    empty = tmp_path / "restored"
    counts = run_json(empty, "import", str(out), "-t", "acme")
    assert (counts["written"], counts["skipped"], counts["errors"], counts["edges"]) == (10, 0, 0, 0)
    assert export_lines(empty, "acme") == export_lines(data_dir, "acme")
    for query in (["apple harvest"], ["cider", "--type", "decision"], [""], ["pear", "--viewer", "carol"]):
        want = run_json(data_dir, "recall", *query, "-t", "acme")["messages"]
        got = run_json(empty, "recall", *query, "-t", "acme")["messages"]
        assert [(m["ref"], m["content"]) for m in got] == [(m["ref"], m["content"]) for m in want]
    for store in (data_dir, empty):
        pages = [run_json(store, "recent", "-t", "acme", "-s", "s1", "--limit", "3")]
        while pages[-1]["next_cursor"]:
            pages.append(run_json(store, "recent", "-t", "acme", "-s", "s1", "--limit", "3", "--cursor",
                                  pages[-1]["next_cursor"]))
        if store == data_dir:
            original = [[t["ref"] for t in p["turns"]] for p in pages]
    assert [[t["ref"] for t in p["turns"]] for p in pages] == original
    again = run_json(empty, "import", str(out), "-t", "acme")
    assert (again["written"], again["skipped"]) == (0, 10)
    assert run_json(empty, "tenants")["tenants"][0]["memories"] == 10
    human = run(empty, "import", str(out), "-t", "acme")
    assert human.exit_code == 0 and "0 written" in human.stdout


@pytest.mark.slow
def test_cross_tenant_export_is_impossible_and_import_refuses_foreign_lines(data_dir: Path, tmp_path: Path) -> None:
    assert {line["tenant"] for line in export_lines(data_dir, "acme")} == {"acme"}
    assert [line["content"] for line in export_lines(data_dir, "globex")] == ["globex secret apple formula"]
    assert run_json(data_dir, "export", "-t", "*", code=2)["error"]["code"] == "INVALID_TENANT"
    out = tmp_path / "globex.jsonl"
    run_json(data_dir, "export", "-t", "globex", "--out", str(out))
    refused = run_json(tmp_path / "other", "import", str(out), "-t", "acme", code=1)
    assert (refused["written"], refused["errors"]) == (0, 1)
    assert refused["error_lines"][0]["code"] == "TENANT_MISMATCH"
    assert run_json(tmp_path / "other", "import", str(tmp_path / "missing.jsonl"), "-t", "acme", code=3)


@pytest.mark.slow
def test_doctor_finds_and_repairs_planted_inconsistencies_without_losing_healthy_memories(data_dir: Path) -> None:
    assert run_json(data_dir, "doctor")["ok"] is True
    before = export_lines(data_dir, "acme")
    with MemoryCore.open(data_dir, settings=load_settings()) as core:
        vector = core._embedder.embed(["a ghost memory"])
        meta = {"tenant": "acme", "session": "s9", "agent": "ghost", "type": "note", "ts_us": 1_760_000_000_000_000,
                "visibility": "tenant", "salience": 0.5, "project_id": "", "kind": "memory"}
        core._vectors.upsert("acme", ["mem:900"], vector, ["a ghost memory"], [meta])
        core._vectors.delete("acme", ["mem:2"])
        with sqlite_db(core).lock:
            fts = sqlite_db(core).conn.execute("SELECT name FROM fts_tables WHERE tenant = 'acme'").fetchone()[0]
        with sqlite_db(core).transaction() as cur:
            cur.execute(f"INSERT INTO {fts} (rowid, content) VALUES (4242, 'stale words')")
    found = run_json(data_dir, "doctor", code=1)
    assert sorted((f["kind"], f["ref"]) for f in found["findings"]) == [
        ("lexical_stale", "mem:4242"), ("vector_missing", "mem:2"), ("vector_orphan", "mem:900")]
    human = run(data_dir, "doctor")
    assert human.exit_code == 1 and "vector_orphan" in human.stdout and "--repair" in human.stdout
    repaired = run_json(data_dir, "doctor", "--repair")
    assert repaired["ok"] is True and repaired["remaining"] == []
    assert {r["kind"] for r in repaired["repairs"]} == {"vector_orphan", "vector_missing", "lexical"}
    assert run(data_dir, "doctor").stdout.strip().endswith("All stores agree.")
    after = export_lines(data_dir, "acme")
    assert [line for line in after if line["ref"] != "mem:900"] == before
    with MemoryCore.open(data_dir, settings=load_settings()) as core:
        assert_stores_agree(core)


def test_init_writes_the_commented_template_that_loads_as_configuration(tmp_path: Path) -> None:
    target = tmp_path / "mc.toml"
    result = runner.invoke(app, ["init", "--config", str(target), "--data-dir", str(tmp_path / "d"), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == {"written": str(target)}
    text = target.read_text()
    assert text.count("#") > 40
    assert tomllib.loads(text)["storage"]["data_dir"] == str(tmp_path / "d")
    assert load_settings(target, environ={}).storage.data_dir == str(tmp_path / "d")
    again = runner.invoke(app, ["init", "--config", str(target)])
    assert again.exit_code == 2 and "--force" in again.stderr
    assert runner.invoke(app, ["init", "--config", str(target), "--force"]).exit_code == 0


def test_the_repository_template_is_the_packaged_one() -> None:
    packaged = ROOT / "memory_core" / "settings" / "config.template.toml"
    assert (ROOT / "config.template.toml").resolve() == packaged.resolve()  # one file, linked at the top
    assert template_text() == packaged.read_text()


@pytest.mark.slow
def test_serve_on_a_port_in_use_fails_with_a_configuration_error(data_dir: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run(data_dir, "serve", "--http", "--host", "127.0.0.1", "--port", str(port), "--json")
    assert result.exit_code == 5
    assert json.loads(result.stdout)["error"]["code"] == "CONFIG_INVALID" and str(port) in result.stdout


def test_show_lists_the_entities_a_memory_mentions(data_dir: Path) -> None:
    added = run_json(data_dir, "add", "-t", "acme", "-s", "s9", "-a", "dave", "We asked Payments API for a refund.")
    shown = run_json(data_dir, "show", added["ref"], "-t", "acme")
    assert "Payments API" in [e["name"] for e in shown["neighbours"]["entities"]]
    human = run(data_dir, "show", added["ref"], "-t", "acme")
    assert human.exit_code == 0 and re.search(r"mentions\s+.*ent:\d+ Payments API", human.stdout)
