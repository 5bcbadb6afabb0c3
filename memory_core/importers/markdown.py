"""Plain Markdown memory files: ``CLAUDE.md``, ``AGENTS.md``, a notes folder.

Mapping: every heading starts a session ``<file stem>/<heading>`` (text before the first heading
is in the session ``<file stem>``); every paragraph, list item, code block, table and HTML block
under it becomes a memory of type ``note``, in order, at the file's modification time (plus one
microsecond per block, so they keep the file's order). Metadata keeps the file and the heading
path. Nothing is declared: the entity extractor runs on the text as on any add. Keys hash the
file, the heading path and the text, so re-importing an edited file adds only the new blocks.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

from memory_core.importers.markdown_blocks import blocks, split_front_matter
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
)

NAME = "markdown"
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
    for found in files(path):
        if isinstance(found, Note):
            yield found
        else:
            yield from _file(*found)


def _file(file: Path, shown: str) -> Read:
    text = read_text(file, shown)
    if isinstance(text, Problem):
        yield text
        return
    front = split_front_matter(text)
    if front.error is not None:
        yield Note(Where(shown, front.error_line), f"{front.error}; it is skipped")
    stem = slug(Path(shown).with_suffix("").as_posix().replace("/", " "), 40)
    base = file_time(file)
    headings: list[tuple[int, str]] = []
    seen: Counter[tuple[str, str]] = Counter()
    index = -1
    for block in blocks(front.body, front.first_line):
        if block.kind == "heading" and not block.quoted:
            headings = [h for h in headings if h[0] < block.level] + [(block.level, block.text)]
            continue
        path = [h for _level, h in headings]
        session = f"{stem}/{slug(path[-1])}" if path else stem
        index += 1
        seen[(session, block.text)] += 1
        occurrence = seen[(session, block.text)]
        legacy = source_key(NAME, shown, " / ".join(path), block.text, occurrence)
        meta = {NAME: {"file": shown, "headings": path}}
        yield SourceItem(block.kind, Where(shown, block.line), block.text, session,
                         base + timedelta(microseconds=index), (shown, " / ".join(path), occurrence), "note",
                         metadata=meta, legacy_keys=(legacy,))
