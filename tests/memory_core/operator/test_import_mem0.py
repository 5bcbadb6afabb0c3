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
from memory_core.importers import mem0
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
