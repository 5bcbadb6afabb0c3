"""basic-memory notes (issue 47.9): two notes of one title in different folders stay two entities (their
permalink is their identity), and a link to that title goes to the one in the linking note's folder.
Notes are written as basic-memory 0.24 writes them: front matter title, type, permalink (the path
without its suffix), tags; observations ``- [category] text``, relations ``- type [[Target]]``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.importers import import_source
from memory_core.operator.transfer import export_tenant
from tests.support.backends import open_core


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryCore]:
    core = open_core("memory", tmp_path / "data", request)
    yield core
    core.close()


def note(root: Path, permalink: str, title: str, body: str) -> None:
    path = root / f"{permalink}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {title}\ntype: note\npermalink: {permalink}\ntags:\n- team\n---\n\n# {title}\n\n"
                    + textwrap.dedent(body).lstrip(), encoding="utf-8")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "basic-memory"
    note(root, "alpha/weekly-sync", "Weekly Sync", """
        - [decision] Alpha ships on Thursdays
        - relates_to [[Alpha Roadmap]]
        """)
    note(root, "beta/weekly-sync", "Weekly Sync", """
        - [decision] Beta freezes on Mondays
        """)
    note(root, "alpha/alpha-roadmap", "Alpha Roadmap", """
        - [goal] Launch in May
        - follows [[Weekly Sync]]
        """)
    return root


def test_two_notes_of_one_title_in_two_folders_stay_two_entities(store: MemoryCore, project: Path) -> None:
    report = import_source(store.operator_parts(), "basic-memory", project, "acme")
    names = {e.name: e for e in store.list_entities("acme")}
    assert {"Weekly Sync (alpha/weekly-sync)", "Weekly Sync (beta/weekly-sync)"} <= names.keys()
    assert "Weekly Sync" not in names
    alpha = {item.entity.name for item in store.related("acme", "Weekly Sync (alpha/weekly-sync)", depth=1).items
             if item.entity is not None}
    assert "Alpha Roadmap" in alpha  # the link in alpha/ went to alpha's note
    beta = {item.entity.name for item in store.related("acme", "Weekly Sync (beta/weekly-sync)", depth=1).items
            if item.entity is not None}
    assert "Alpha Roadmap" not in beta
    assert any("2 notes are titled 'Weekly Sync'" in n["message"] for n in report.notes)
    rows = {r["content"]: r for r in export_tenant(store.operator_parts(), "acme")}
    assert rows["Weekly Sync relates to Alpha Roadmap"]["session"] == "alpha/weekly-sync"  # the text keeps the title
