"""The upkeep commands (consolidate, its dry run and --undo) through Typer's runner, on an embedded store."""

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
COPIES = ["the staging database runs on postgres sixteen behind pgbouncer",
          "The staging database runs on Postgres sixteen, behind pgbouncer.",
          "note: the staging database runs on postgres sixteen behind pgbouncer"]


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, list[str]]]:
    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    path = tmp_path / "data"
    with MemoryCore.open(path, settings=load_settings()) as core:
        refs = [core.add_memory("acme", "s1", "ann", text, type="note").ref for text in COPIES]
        core.add_memory("globex", "s1", "ann", COPIES[0], type="note")
        core.add_memory("globex", "s1", "ann", COPIES[1], type="note")
    yield path, refs


def run(path: Path, *args: str) -> tuple[int, Any]:
    result = runner.invoke(app, [*args, "--data-dir", str(path), "--json"])
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def test_a_dry_run_lists_the_merge_then_a_run_makes_it_and_undo_reverses_it(store: tuple[Path, list[str]]) -> None:
    path, refs = store
    code, dry = run(path, "consolidate", "--tenant", "acme", "--dry-run")
    assert code == 0 and dry["dry_run"] is True and dry["rows_retired"] == 2
    assert [sorted(m["merged"]) for m in dry["merges"]] == [sorted(refs)] and dry["merges"][0]["canonical"] is None
    code, done = run(path, "consolidate", "--tenant", "acme")
    canonical = done["merges"][0]["canonical"]
    assert code == 0 and canonical.startswith("mem:") and set(done["scanned"]) == {"acme"}
    code, found = run(path, "recall", "staging database", "--tenant", "globex", "--no-collapse")
    assert code == 0 and len(found["messages"]) == 2  # the other tenant was not touched
    code, undone = run(path, "consolidate", "--tenant", "acme", "--undo", canonical)
    assert code == 0 and sorted(undone["restored"]) == sorted(refs)
    code, again = run(path, "consolidate", "--tenant", "acme", "--undo", canonical)
    assert (code, again["error"]["code"]) == (3, "NOT_FOUND")


def test_every_tenant_by_default_and_a_table_for_people(store: tuple[Path, list[str]]) -> None:
    path, _refs = store
    table = runner.invoke(app, ["consolidate", "--data-dir", str(path)])
    assert table.exit_code == 0, table.stdout
    assert "2 clusters merged: 3 of" in table.stdout and "acme" in table.stdout and "globex" in table.stdout


def test_undo_needs_a_tenant(store: tuple[Path, list[str]]) -> None:
    path, refs = store
    code, out = run(path, "consolidate", "--undo", refs[0])
    assert code == 2 and out["error"]["code"] == "TENANT_REQUIRED"


def test_retention_plan_apply_and_restore_through_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime, timedelta

    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    config = tmp_path / "memory-core.toml"
    config.write_text("[retention]\narchive_after_days = { turn = 90 }\n")
    path = tmp_path / "data"
    old = (datetime.now(UTC) - timedelta(days=100)).isoformat()
    with MemoryCore.open(path, settings=load_settings(config)) as core:
        gone = core.add_memory("acme", "s1", "ann", "an old turn about the kiwi harvest", timestamp=old).ref
        other = core.add_memory("globex", "s1", "ann", "an old turn about the kiwi harvest", timestamp=old).ref
        kept = core.add_memory("acme", "s1", "ann", "a fresh turn about the kiwi harvest").ref
    code, plan = run(path, "retention", "plan", "--config", str(config))
    assert code == 0 and sorted(a["ref"] for a in plan["archived"]) == sorted([gone, other])
    code, done = run(path, "retention", "apply", "--tenant", "acme", "--config", str(config))
    assert code == 0 and [a["ref"] for a in done["archived"]] == [gone] and done["applied"] is True
    code, found = run(path, "recall", "kiwi harvest", "--tenant", "acme", "--config", str(config))
    assert [m["ref"] for m in found["messages"]] == [kept]
    code, shown = run(path, "show", gone, "--tenant", "acme", "--config", str(config))
    assert code == 0 and shown["memory"]["archived"]
    code, out = run(path, "retention", "restore", other, "--tenant", "acme", "--config", str(config))
    assert (code, out["error"]["code"]) == (3, "NOT_FOUND")
    code, out = run(path, "retention", "restore", gone, "--tenant", "acme", "--config", str(config))
    assert code == 0 and out == {"restored": [gone]}
    table = runner.invoke(app, ["retention", "plan", "--data-dir", str(path), "--config", str(config)])
    assert table.exit_code == 0 and "2 memories due" in table.stdout


@pytest.mark.slow
def test_reembed_through_the_cli_switches_the_store_to_the_new_model(
        store: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    path, refs = store
    code, out = run(path, "reembed", "--model", "hash:32")
    assert code == 0 and out["switched"] is True and out["to"] == "hash-bow/32"
    assert out["settings"] == {"provider": "hash", "dimension": 32} and out["embedded"] == {"acme": 3, "globex": 2}
    code, err = run(path, "recall", "staging", "--tenant", "acme")
    assert (code, err["error"]["code"]) == (5, "EMBEDDER_MISMATCH")  # the configuration still names the old model
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_DIMENSION", "32")
    code, found = run(path, "recall", "staging database", "--tenant", "acme", "--no-collapse")
    assert code == 0 and sorted(m["ref"] for m in found["messages"]) == sorted(refs)
    code, again = run(path, "reembed", "--model", "hash:32")
    assert (code, again["error"]["code"]) == (2, "INVALID_INPUT")
    code, bad = run(path, "reembed", "--model", "word2vec")
    assert (code, bad["error"]["code"]) == (2, "INVALID_INPUT")


def test_model_canonical_has_the_provider_write_the_text_or_says_why_not(store: tuple[Path, list[str]],
                                                                        tmp_path: Path) -> None:
    from tests.support.fake_llm import fake_llm, ok

    path, _refs = store
    faithful = "The staging database runs on Postgres sixteen behind pgbouncer."
    with fake_llm(ok(faithful)) as fake:
        config = tmp_path / "model.toml"
        config.write_text(f'[model_provider]\nenabled = true\napi_base = "{fake.api_base}"\nmax_retries = 0\n',
                          encoding="utf-8")
        code, out = run(path, "consolidate", "--tenant", "acme", "--model-canonical", "--config", str(config))
        assert code == 0 and [m["content"] for m in out["merges"]] == [faithful]
        assert out["merges"][0]["text"] == {"by": "model", "model": "openai/gpt-4o-mini"}
        assert fake.request_count == 1
    code, out = run(path, "consolidate", "--tenant", "globex", "--model-canonical")  # no provider configured
    assert code == 0 and out["merges"][0]["text"] == {"by": "member", "fallback": "provider disabled"}
    assert out["merges"][0]["content"] in COPIES
