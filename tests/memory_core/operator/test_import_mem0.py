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
    return list(export_tenant(core, tenant))


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
    report = import_source(store, "mem0", dump, "acme")
    assert (report.written, report.skipped, report.duplicates) == (5, 0, 0)
    assert sorted(r["content"] for r in rows(store)) == [f"Distinct fact {i}" for i in range(5)]
    assert import_source(store, "mem0", dump, "acme").written == 0


def test_the_same_memory_twice_is_imported_once_and_reported(store: MemoryCore, tmp_path: Path) -> None:
    twice = memory(1, "Works remotely on Fridays")
    changed = memory(2, "Prefers tea") | {"updated_at": "2026-03-01T00:00:00Z"}
    dump = write_dump(tmp_path / "merged.json", [twice, memory(2, "Prefers coffee"), twice, changed])
    report = import_source(store, "mem0", dump, "acme")
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
    report = import_source(store, "mem0", dump, "acme")
    assert (report.written, report.skipped) == (4, 1)
    assert len(rows(store)) == 5
