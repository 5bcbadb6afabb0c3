"""Markdown notes (issue 47.8): keys that do not depend on the folder imported, note titles as entities
and ``[[wikilinks]]`` as relations, and no noise entities from code or task markers. The vault here
is shaped as Obsidian leaves one: a ``.obsidian`` folder at its root, notes in subfolders linking
each other by file name, with and without front matter.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def rows(core: MemoryCore, tenant: str = "acme") -> list[dict[str, Any]]:
    return list(export_tenant(core.operator_parts(), tenant))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / ".obsidian").mkdir(parents=True)
    (root / ".obsidian" / "app.json").write_text("{}")
    write(root / "Home.md", """
        # Home

        Start at [[Decisions]] and the [[runbook|ops runbook]].
        """)
    write(root / "projects" / "decisions.md", """
        ---
        aliases: [ADR log]
        tags: [architecture]
        ---
        # Decisions

        - We chose SQLite for the embedded store; see [[runbook#Backups]].
        - Postgres for replicas, decided with Dana Ortiz.

        ```sql
        SELECT id FROM decisions WHERE status = 'accepted';
        ```
        """)
    write(root / "projects" / "ops" / "runbook.md", """
        # Runbook

        - [ ] Ask the on-call engineer before a failover.
        - [x] Send the incident summary to the team.
        - Restore from the nightly backup.
        """)
    return root


def test_importing_a_subfolder_then_the_whole_vault_writes_nothing_twice(store: MemoryCore, vault: Path) -> None:
    first = import_source(store.operator_parts(), "markdown", vault / "projects", "acme")
    whole = import_source(store.operator_parts(), "markdown", vault, "acme")
    assert (whole.skipped, whole.written) == (first.written, 1)  # only Home.md is new
    assert len(rows(store)) == first.written + 1
    sessions = {r["session"] for r in rows(store)}
    assert "projects-decisions/decisions" in sessions and "projects-ops-runbook/runbook" in sessions
    again = import_source(store.operator_parts(), "markdown", vault / "projects" / "ops", "acme")
    assert again.written == 0


def test_a_folder_without_markers_keys_notes_by_their_front_matter_id(store: MemoryCore, tmp_path: Path) -> None:
    write(tmp_path / "notes" / "team" / "meeting.md", """
        ---
        id: 20240301-standup
        ---
        # Standup

        We moved the standup to ten.
        """)
    import_source(store.operator_parts(), "markdown", tmp_path / "notes" / "team", "acme")
    assert import_source(store.operator_parts(), "markdown", tmp_path / "notes", "acme").written == 0


def test_note_titles_become_entities_and_wikilinks_relations(store: MemoryCore, vault: Path) -> None:
    report = import_source(store.operator_parts(), "markdown", vault, "acme")
    kinds = {e.name: e.kind for e in store.list_entities("acme")}
    assert kinds["Home"] == kinds["Decisions"] == kinds["Runbook"] == "note"
    home = {item.entity.name: str(item.path[-1].via) for item in store.related("acme", "Home", depth=1).items
            if item.entity is not None}
    assert home["Decisions"] == "RELATED:links_to" and home["Runbook"] == "RELATED:links_to"  # by file name
    decisions = {item.entity.name for item in store.related("acme", "ADR log", depth=1).items
                 if item.entity is not None}  # its front matter alias finds it
    assert "Runbook" in decisions
    assert report.entities >= 3 and report.relations == 3


def test_code_blocks_and_task_markers_make_no_noise_entities(store: MemoryCore, vault: Path) -> None:
    import_source(store.operator_parts(), "markdown", vault, "acme")
    names = {e.name for e in store.list_entities("acme")}
    assert not names & {"SELECT", "FROM", "WHERE", "Ask", "Send"}
    assert "Dana Ortiz" in names  # prose is still read by the extractor
