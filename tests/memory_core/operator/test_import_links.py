"""A notes folder is read without following links out of it (issue 46.2): a symlinked ``.md`` or
folder pointing elsewhere on the machine is never read; each skipped link is named in the report.
A link to a file inside the folder is not followed either (that file is imported once, under its
own name); a named pipe is skipped, never opened (it would block the import).
"""

from __future__ import annotations

import json
import os
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


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A notes folder holding one real note, links out of it and into it, and a named pipe."""
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dir").mkdir(parents=True)
    (elsewhere / "private.md").write_text("---\ntitle: Private\n---\n# Private\n\n- [secret] machine-wide "
                                          "private text\n")
    (elsewhere / "dir" / "deep.md").write_text("# Deep\n\nalso private text from elsewhere\n")
    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    (notes / "real.md").write_text("---\ntitle: Real\n---\n# Real\n\n- [fact] the one real note\n")
    (notes / "leak.md").symlink_to(elsewhere / "private.md")
    (notes / "sub" / "linked-dir").symlink_to(elsewhere / "dir", target_is_directory=True)
    (notes / "again.md").symlink_to(notes / "real.md")
    os.mkfifo(notes / "pipe.md")
    return notes


@pytest.mark.parametrize("source", ["markdown", "basic-memory"])
def test_links_out_of_the_folder_are_never_followed_and_each_is_named(
        store: MemoryCore, vault: Path, source: str) -> None:
    report = import_source(store.operator_parts(), source, vault, "acme")
    stored = json.dumps(list(export_tenant(store.operator_parts(), "acme")))
    assert "private text" not in stored and report.written == 1 and report.errors == 0
    skipped = {n["file"]: n["message"] for n in report.notes}
    assert "points outside the imported folder" in skipped["leak.md"]
    assert "points outside the imported folder" in skipped["sub/linked-dir"]
    assert "real.md" in skipped["again.md"] and "imported under its own name" in skipped["again.md"]
    assert "not a regular file" in skipped["pipe.md"]
    assert report.links_skipped == 3


def test_a_link_named_on_the_command_line_is_followed(store: MemoryCore, vault: Path, tmp_path: Path) -> None:
    named = tmp_path / "CLAUDE.md"
    named.symlink_to(vault / "real.md")
    assert import_source(store.operator_parts(), "markdown", named, "acme").written == 1
    linked_folder = tmp_path / "notes-link"
    linked_folder.symlink_to(vault, target_is_directory=True)
    report = import_source(store.operator_parts(), "markdown", linked_folder, "acme", dry_run=True)
    assert report.items == 1 and "leak.md" in {n["file"] for n in report.notes}


def test_a_file_swapped_for_a_link_after_the_folder_was_listed_is_not_read(vault: Path, tmp_path: Path) -> None:
    from memory_core.importers.source import read_text

    swapped = vault / "real.md"
    swapped.unlink()
    swapped.symlink_to(tmp_path / "elsewhere" / "private.md")  # between listing and reading
    problem = read_text(swapped, "real.md")
    assert not isinstance(problem, str) and "cannot be read" in problem.message
