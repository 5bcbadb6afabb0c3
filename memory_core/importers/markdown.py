"""Plain Markdown memory files: ``CLAUDE.md``, ``AGENTS.md``, a notes folder (an Obsidian vault).

Mapping: each file is a note, and an ENTITY (kind ``note``) named by its title (front matter
``title``, else its first ``#`` heading, else its file name; see :mod:`.notes`). Every heading starts
a session ``<file>/<heading>`` (text before the first heading is in the session ``<file>``; ``<file>``
is the note's path in the vault, as words); every paragraph, list item, code block, table and HTML
block under it becomes a memory of type ``note``, in order, at the file's modification time (plus one
microsecond per block, so they keep the file's order), that mentions the note's entity; a
``[[wikilink]]`` in a paragraph or item is a ``links_to`` relation from the note to the note (or
entity) it names. The entity extractor runs on prose and tables as on any add, not on code or HTML
blocks (``SELECT … FROM … WHERE`` names nothing). Metadata keeps the note's path in the vault, its title and the
heading path.

Keys hash the note's identity (its front matter ``permalink`` or ``id``, else its path relative to
the vault's root: the same whichever folder is imported), the heading path and the text as stored,
so re-importing an edited file adds only the new blocks, and importing a subfolder then the whole
vault writes nothing twice. Keys of releases before issue 47 (relative to the imported folder) are
recognised.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from graph.api import entity_norm
from memory_core.entities.declared import MAX_RELATIONS
from memory_core.importers.markdown_blocks import blocks, split_front_matter
from memory_core.importers.notes import NoteHead, NoteIndex, read_head, vault_root, wikilinks
from memory_core.importers.source import (
    LinkSkipped,
    Note,
    Problem,
    Read,
    SourceItem,
    Where,
    file_time,
    read_text,
    slug,
    source_key,
    undecodable,
)

NAME = "markdown"
LINKS_TO = "links_to"
SUFFIXES = (".md", ".markdown")


def files(path: Path) -> Iterator[tuple[Path, str] | Note]:
    """The Markdown files of ``path`` (itself, or every one under it outside hidden folders, in name
    order), each with the name it is reported under (relative to the folder), and a :class:`Note` for
    each entry skipped: a symbolic link (never followed: one out of the folder would import a file from
    elsewhere on the machine, one inside it a file imported anyway under its own name) or a file that is
    not a regular one (a named pipe would block the import). ``path`` itself is followed when it is a
    link: the user named it."""
    if not path.is_dir():
        yield path.resolve(), path.name
        return
    root = path.resolve()
    for folder, dirs, names in os.walk(root, followlinks=False):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names) + [d for d in dirs if (here / d).is_symlink()]:
            entry = here / name
            shown = entry.relative_to(root).as_posix()
            if name.startswith(".") or (not entry.is_symlink() and entry.suffix.lower() not in SUFFIXES):
                continue
            if entry.is_symlink():
                yield _link_note(entry, root, shown)
            elif not stat.S_ISREG(entry.lstat().st_mode):
                yield Note(Where(shown), "not a regular file (a named pipe, a device…): skipped")
            else:
                yield entry, shown


def _link_note(entry: Path, root: Path, shown: str) -> Note:
    target = entry.resolve()
    if target.is_relative_to(root) and target != root:
        inside = target.relative_to(root).as_posix()
        return LinkSkipped(Where(shown), f"a symbolic link to {inside}, inside the imported folder: not followed "
                                         f"({inside} is imported under its own name)")
    return LinkSkipped(Where(shown), "a symbolic link that points outside the imported folder: not followed (an "
                                     "import never reads a file from elsewhere on the machine)")


def read(path: Path) -> Read:
    """The memories the Markdown file (or folder of files) ``path`` becomes."""
    root = vault_root(path)
    found: list[tuple[Path, str]] = []
    for entry in files(path):
        if isinstance(entry, Note):
            yield entry
        else:
            found.append(entry)
    index = NoteIndex(head(file, shown, root) for file, shown in found)
    yield from index.notes()
    for file, shown in found:
        yield from _file(file, shown, index)


def head(file: Path, shown: str, root: Path) -> NoteHead:
    """The note's head (its title, permalink, path in the vault): the first of the two passes over a folder."""
    text = read_text(file, shown)
    vault_path = file.resolve().relative_to(root).with_suffix("").as_posix()
    return read_head(text if isinstance(text, str) else "", shown, vault_path)


def _file(file: Path, shown: str, index: NoteIndex) -> Read:
    text = read_text(file, shown)
    note = index.head(shown)
    if isinstance(text, Problem) or note is None:
        yield text if isinstance(text, Problem) else Problem(Where(shown), "The file changed while it was read.")
        return
    front = split_front_matter(text)
    if front.error is not None:
        yield Note(Where(shown, front.error_line), f"{front.error}; it is skipped")
    stem = slug(note.path.replace("/", " "), 80)
    base = file_time(file)
    headings: list[tuple[int, str]] = []
    seen: Counter[tuple[str, str]] = Counter()
    entity: dict[str, Any] = {"name": note.entity, "kind": "note"}
    if note.aliases:
        entity["aliases"] = note.aliases
    index_no = -1
    for block in blocks(front.body, front.first_line):
        if block.kind == "heading" and not block.quoted:
            headings = [h for h in headings if h[0] < block.level] + [(block.level, block.text)]
            continue
        path = [h for _level, h in headings]
        session = f"{stem}/{slug(path[-1])}" if path else stem
        index_no += 1
        bad = undecodable(block.text, Where(shown, block.line))
        if bad is not None:  # this block is refused; the rest of the note is read
            yield bad
            continue
        seen[(session, block.text)] += 1
        occurrence = seen[(session, block.text)]
        legacy = source_key(NAME, shown, " / ".join(path), block.text, occurrence)
        meta = {NAME: {"file": f"{note.path}{Path(shown).suffix}", "title": note.title, "headings": path}}
        where = Where(shown, block.line)
        entities: list[dict[str, Any]] = [entity]
        relations: list[dict[str, Any]] = []
        if block.kind in ("paragraph", "item"):
            for target in wikilinks(block.text):
                name, remark = index.resolve(target, note)
                if remark is not None:
                    yield Note(where, remark)
                if entity_norm(name) == entity_norm(note.entity) or len(relations) >= MAX_RELATIONS:
                    continue
                if not any(entity_norm(e["name"]) == entity_norm(name) for e in entities):
                    entities.append({"name": name})
                relations.append({"from": note.entity, "to": name, "label": LINKS_TO})
        yield SourceItem(block.kind, where, block.text, session, base + timedelta(microseconds=index_no),
                         (note.identity, " / ".join(path), occurrence), "note", metadata=meta,
                         entities=entities, relations=relations, legacy_keys=(legacy,),
                         extract=block.kind in ("paragraph", "item", "table"))
