"""mem0 dumps (issues 46 and 47): reading them in linear time with the right lines, ids as identity,
expired memories, cut dumps and what of the clear text may be kept.

The dumps are written as mem0 2.2 returns them: ``Memory.get_all(filters=..., top_k=...)`` gives
``{"results": [MemoryItem.model_dump(exclude={"score"}) + promoted payload keys]}``, saved with
``json.dump`` (``ensure_ascii`` on, so non-ASCII text arrives as ``\\uXXXX`` escapes).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.importers import import_source, mem0
from memory_core.importers.source import Problem, SourceItem
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def rows(core: MemoryCore, tenant: str = "acme") -> list[dict[str, Any]]:
    return list(export_tenant(core.operator_parts(), tenant))


def memory(i: int, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """One memory as mem0 2.2's get_all returns it."""
    out = {"id": f"{i:08x}-7c1e-4f7e-9a63-1d1b5a0c7e01", "memory": text or f"Fact number {i} about the project",
           "hash": f"{i:032x}", "metadata": None, "created_at": "2026-02-20T08:15:30.123456-08:00",
           "updated_at": None, "user_id": "alice"}
    return out | extra


def test_a_pretty_printed_dump_names_the_line_each_memory_starts_on(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    tricky = memory(1, 'Brackets ] } [ { and "quotes" and a \\n in the text')
    page = {"count": 3, "next": None, "previous": None,
            "results": [tricky, memory(2), {"id": "x", "memory": ""}]}
    path.write_text(json.dumps(page, indent=2).replace("\n", "\r\n"), encoding="utf-8")
    got = list(mem0.read(path))
    lines = path.read_text(encoding="utf-8").split("\n")
    firsts = [i + 1 for i, line in enumerate(lines) if line.strip() == "{"][1:]  # each memory's opening line
    assert [g.where.line for g in got] == firsts
    assert isinstance(got[0], SourceItem) and got[0].content == tricky["memory"]
    assert isinstance(got[2], Problem) and (got[2].where.line, got[2].where.field) == (firsts[2], "memory")


def test_a_broken_document_is_refused_at_its_line_and_what_came_before_is_read(tmp_path: Path) -> None:
    path = tmp_path / "dump.json"
    text = json.dumps({"results": [memory(1), memory(2)]}, indent=2)
    cut = text.rindex('"updated_at"')  # inside the second memory
    path.write_text(text[:cut] + "oops", encoding="utf-8")
    got = list(mem0.read(path))
    assert isinstance(got[0], SourceItem) and isinstance(got[-1], Problem) and len(got) == 2
    assert got[-1].message.startswith("Not JSON") and "read no further" in got[-1].message
    assert got[-1].where.line == text.count("\n", 0, cut) + 1


# ---- ids, not hashes, say which memory is which (issue 46.8) -------------------------------------------

def write_dump(path: Path, memories: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"results": memories}, indent=2), encoding="utf-8")
    return path


def test_five_memories_sharing_a_hash_but_differing_are_all_imported(store: MemoryCore, tmp_path: Path) -> None:
    shared = "5d41402abc4b2a76b9719d911017c592"  # five texts, one hash: the export's hash is not the identity
    dump = write_dump(tmp_path / "get_all.json", [memory(i, f"Distinct fact {i}", hash=shared) for i in range(5)])
    report = import_source(store.operator_parts(), "mem0", dump, "acme")
    assert (report.written, report.skipped, report.duplicates) == (5, 0, 0)
    assert sorted(r["content"] for r in rows(store)) == [f"Distinct fact {i}" for i in range(5)]
    assert import_source(store.operator_parts(), "mem0", dump, "acme").written == 0


def test_the_same_memory_twice_is_imported_once_and_reported(store: MemoryCore, tmp_path: Path) -> None:
    twice = memory(1, "Works remotely on Fridays")
    changed = memory(2, "Prefers tea") | {"updated_at": "2026-03-01T00:00:00Z"}
    dump = write_dump(tmp_path / "merged.json", [twice, memory(2, "Prefers coffee"), twice, changed])
    report = import_source(store.operator_parts(), "mem0", dump, "acme")
    assert (report.written, report.duplicates) == (3, 1)
    assert [n["message"] for n in report.notes] == [
        f"the same memory as line 3 (id {twice['id']}, the same text): imported once",
        f"id {changed['id']} is also on line 12 with other text: both are imported"]
    assert sorted(r["content"] for r in rows(store)) == ["Prefers coffee", "Prefers tea", "Works remotely on Fridays"]


def test_a_store_imported_when_five_memories_collapsed_gets_the_four_it_missed(
        store: MemoryCore, tmp_path: Path) -> None:
    shared = "5d41402abc4b2a76b9719d911017c592"
    dump = write_dump(tmp_path / "get_all.json", [memory(i, f"Distinct fact {i}", hash=shared) for i in range(5)])
    from tests.memory_core.operator.test_import_keys import import_as_before

    assert import_as_before(store, "mem0", dump) == 1  # what the release before issue 46 wrote
    report = import_source(store.operator_parts(), "mem0", dump, "acme")
    assert (report.written, report.skipped) == (4, 1)
    assert len(rows(store)) == 5


# ---- cut dumps and expired memories (issue 47.5) -------------------------------------------------------

def test_a_dump_of_exactly_mem0s_default_page_warns_that_it_may_be_cut(store: MemoryCore, tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "cut.json", [memory(i) for i in range(20)])
    cut = import_source(store.operator_parts(), "mem0", dump, "acme", dry_run=True)
    assert len(cut.warnings) == 1 and "exactly 20 memories" in cut.warnings[0]["message"]
    assert "top_k" in cut.warnings[0]["message"]
    for n in (19, 21):
        dump = write_dump(tmp_path / f"{n}.json", [memory(i) for i in range(n)])
        whole = import_source(store.operator_parts(), "mem0", dump, "acme", dry_run=True)
        assert whole.warnings == []


def test_one_page_of_the_platform_clients_get_all_warns_that_more_pages_exist(store: MemoryCore,
                                                                               tmp_path: Path) -> None:
    page = {"count": 57, "next": "https://api.example/v3/memories/?page=2&page_size=25", "previous": None,
            "results": [memory(i) for i in range(25)]}
    path = tmp_path / "page1.json"
    path.write_text(json.dumps(page, indent=2), encoding="utf-8")
    report = import_source(store.operator_parts(), "mem0", path, "acme", dry_run=True)
    assert report.written == 25 and len(report.warnings) == 1
    assert "25 of 57" in report.warnings[0]["message"] and "next" in report.warnings[0]["message"]


def test_expired_memories_are_skipped_and_counted_unless_asked_for(store: MemoryCore, tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "get_all.json", [
        memory(1, "Is on holiday until March", expiration_date="2020-03-01"),
        memory(2, "Is based in the Lisbon office", expiration_date="2999-12-31"),
        memory(3, "Prefers short meetings")])
    report = import_source(store.operator_parts(), "mem0", dump, "acme")
    assert (report.written, report.expired) == (2, 1)
    assert "Is on holiday until March" not in [r["content"] for r in rows(store)]
    lisbon = next(r for r in rows(store) if r["content"].startswith("Is based"))
    assert lisbon["valid_to"] is None and lisbon["metadata"]["mem0"]["expiration_date"] == "2999-12-31"
    assert any("expired on 2020-03-01" in n["message"] for n in report.notes)
    again = import_source(store.operator_parts(), "mem0", dump, "acme", include_expired=True)
    assert (again.written, again.skipped, again.expired) == (1, 2, 1)
    holiday = next(r for r in rows(store) if r["content"] == "Is on holiday until March")
    assert holiday["valid_to"] == "2020-03-02T00:00:00.000000+00:00"  # valid through its expiration day
    assert "Is on holiday until March" not in [m.content for m in store.recall("acme", "holiday").messages]


def test_a_malformed_expiration_date_is_refused_naming_the_field(store: MemoryCore, tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "get_all.json", [memory(1, expiration_date="next week"), memory(2)])
    report = import_source(store.operator_parts(), "mem0", dump, "acme", skip_bad=True)
    assert [(e["line"], e["field"]) for e in report.error_items] == [(3, "expiration_date")]


def test_the_cli_says_a_dump_may_be_cut_and_how_many_expired(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from tools.cli.app import app

    for name in [k for k in __import__("os").environ if k.startswith("MEMORY_CORE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("MEMORY_CORE_EMBEDDING_PROVIDER", "hash")
    dump = write_dump(tmp_path / "get_all.json", [memory(i) for i in range(19)]
                      + [memory(19, "Was on call last week", expiration_date="2020-01-01")])
    args = ["import", str(dump), "--from", "mem0", "-t", "acme", "--data-dir", str(tmp_path / "data")]
    human = CliRunner().invoke(app, args)
    text = " ".join(human.stdout.split())
    assert human.exit_code == 0, human.stdout
    assert "19 memories written" in text and "1 memories had expired: skipped (--include-expired" in text
    assert "warning: get_all.json: the dump holds exactly 20 memories" in text
    out = json.loads(CliRunner().invoke(app, [*args, "--include-expired", "--json"]).stdout)
    assert (out["written"], out["skipped"], out["expired"]) == (1, 19, 1) and len(out["warnings"]) == 1
    wrong = CliRunner().invoke(app, ["import", str(dump), "-t", "acme", "--include-expired", "--json",
                                     "--data-dir", str(tmp_path / "data")])
    assert wrong.exit_code == 2 and json.loads(wrong.stdout)["error"]["code"] == "INVALID_INPUT"


# ---- write-time hygiene on an import: off unless asked (issue 50.1) --------------------------------------

def test_an_import_keeps_junk_unless_hygiene_is_asked_and_then_counts_it(request: pytest.FixtureRequest,
                                                                          tmp_path: Path) -> None:
    texts = ["Prefers Postgres 16", "ok", "NO_REPLY", "[heartbeat] 2026-02-20T08:00:00Z", "port 5433", "no"]
    dump = write_dump(tmp_path / "get_all.json", [memory(i, t) for i, t in enumerate(texts)])
    plain = open_core("memory", tmp_path / "plain", request)
    screened = open_core("memory", tmp_path / "screened", request)
    try:
        assert import_source(plain.operator_parts(), "mem0", dump, "acme").written == 6
        assert {r["provenance"] for r in rows(plain)} == {"import"}
        report = import_source(screened.operator_parts(), "mem0", dump, "acme", hygiene=True)
        assert report.written == 3 and report.to_dict()["junk"] == {"acknowledgement": 2, "heartbeat": 1}
        assert sorted(r["content"] for r in rows(screened)) == ["Prefers Postgres 16", "no", "port 5433"]
    finally:
        plain.close()
        screened.close()
