"""doctor and secrets stored before the guard existed: the scan names where they are (fields and
kinds, never a value), ``--repair`` redacts them in the graph, the lexical index, Chroma's document
and embedding and the SQLite file, recall can no longer find them by their words, and a store
kept under ``security.secrets = "allow"`` is left alone."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from graph.api import RowFilter
from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.transfer import export_tenant
from memory_core.secret_guard import detect
from memory_core.settings import load_settings
from testbed.secrets_corpus import ALL_SECRETS, SAMPLES, file_leaks, leaks
from tools.cli.app import app

WITH_SECRETS = [s for s in SAMPLES if s.secrets][:8]


def open_store(path: Path, policy: str) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"},
                                                    "security": {"secrets": policy}})
    return MemoryCore.open(path, settings=settings, embedder=HashEmbedder())


def old_store(path: Path) -> list[str]:
    """A store written with secrets in clear (as before the guard): memories, metadata, a summary."""
    with open_store(path, "allow") as core:
        refs = [core.add_memory("acme", "s1", "alice", s.text, metadata={"env": {"db_password": "hunter2!x"}}).ref
                for s in WITH_SECRETS]
        core.summarize_session("acme", "s1")
        core.add_memory("globex", "g1", "bob", "nothing secret here")
    return refs


def test_the_scan_names_fields_and_kinds_of_stored_secrets_and_never_a_value(tmp_path: Path) -> None:
    refs = old_store(tmp_path / "data")
    with open_store(tmp_path / "data", "redact") as core:
        report = check_stores(core.operator_parts())
    found = [f for f in report.findings if f.kind == "secret_stored"]
    assert {f.ref for f in found} >= set(refs) and any(str(f.ref).startswith("ep:") for f in found)
    assert not [f for f in found if f.tenant == "globex"]
    first = next(f for f in found if f.ref == refs[0])
    assert first.detail.startswith("secrets stored in clear (content: 1 aws-access-key")
    assert "metadata: 1 password" in first.detail
    assert leaks(json.dumps(report.to_dict()), ALL_SECRETS) == []


def test_under_allow_stored_secrets_are_the_operators_choice(tmp_path: Path) -> None:
    old_store(tmp_path / "data")
    with open_store(tmp_path / "data", "allow") as core:
        assert not [f for f in check_stores(core.operator_parts()).findings if f.kind == "secret_stored"]
        assert check_stores(core.operator_parts()).ok


def test_repair_redacts_every_store_and_the_words_of_a_secret_find_nothing(tmp_path: Path) -> None:
    refs = old_store(tmp_path / "data")
    token = next(v for s in WITH_SECRETS for k, v in s.secrets if k == "github-token")
    with open_store(tmp_path / "data", "redact") as core:
        assert core._graph.lexical_phrases(RowFilter("acme"), [token.lower()], 10), "the token is indexed before"
        report = repair_stores(core.operator_parts())
        assert report.ok, [f.to_dict() for f in report.remaining or []]
        assert {r.ref for r in report.repairs if r.kind == "secret_stored"} >= set(refs)
        rows = core.get_contents("acme", refs).found
        assert len(rows) == len(refs) and all("[REDACTED:" in r.content for r in rows)
        assert rows[0].metadata == {"env": {"db_password": "[REDACTED:password]"}}
        assert not core._graph.lexical_phrases(RowFilter("acme"), [token.lower()], 10)
        documents = core._vectors.documents("acme", sorted(core._vectors.all_ids("acme")))
        assert not [ref for ref, (doc, _meta) in documents.items() if detect(doc)]
        reads = [json.dumps(r.to_dict()) for r in rows]
        reads += [json.dumps(line) for line in export_tenant(core.operator_parts(), "acme")]
        reads.append(json.dumps(core.summarize_session("acme", "s1").to_dict()))
        reads += [json.dumps(m.to_dict()) for m in core.recall("acme", token, limit=20).messages]
        assert leaks("\n".join(reads), ALL_SECRETS) == []
        assert check_stores(core.operator_parts()).ok
        again = repair_stores(core.operator_parts())
        assert not [r for r in again.repairs if r.kind == "secret_stored"], "a second repair has nothing to do"
    graph_files = list((tmp_path / "data").glob("graph.sqlite3*"))
    assert graph_files and not [f for f in file_leaks(tmp_path / "data", ALL_SECRETS) if f.startswith("graph")]


def test_the_cli_doctor_reports_and_repairs_stored_secrets(tmp_path: Path) -> None:
    old_store(tmp_path / "data")
    runner = CliRunner()
    env = {"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}
    checked = runner.invoke(app, ["doctor", "--data-dir", str(tmp_path / "data"), "--json"], env=env)
    kinds = {f["kind"] for f in json.loads(checked.stdout)["findings"]}
    assert "secret_stored" in kinds and leaks(checked.stdout, ALL_SECRETS) == []
    fixed = runner.invoke(app, ["doctor", "--repair", "--data-dir", str(tmp_path / "data"), "--json"], env=env)
    assert json.loads(fixed.stdout)["ok"] is True, fixed.stdout[-2000:]
    assert leaks(fixed.stdout, ALL_SECRETS) == []
