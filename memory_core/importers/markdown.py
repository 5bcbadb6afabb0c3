"""Plain Markdown memory files: ``CLAUDE.md``, ``AGENTS.md``, a notes folder.

Mapping: every heading starts a session ``<file stem>/<heading>`` (text before the first heading
is in the session ``<file stem>``); every paragraph, list item, code block, table and HTML block
under it becomes a memory of type ``note``, in order, at the file's modification time (plus one
microsecond per block, so they keep the file's order). Metadata keeps the file and the heading
path. Nothing is declared: the entity extractor runs on the text as on any add. Keys hash the
file, the heading path and the text, so re-importing an edited file adds only the new blocks.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

from memory_core.importers.markdown_blocks import blocks, split_front_matter
from memory_core.importers.source import Note, Problem, Read, SourceItem, Where, file_time, read_text, slug, source_key

NAME = "markdown"
SUFFIXES = (".md", ".markdown")


def files(path: Path) -> list[tuple[Path, str]]:
    """The Markdown files of ``path`` (itself, or every one under it outside hidden folders), with the
    name each is reported under (relative to the folder)."""
    if path.is_file():
        return [(path, path.name)]
    found = sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES
                   and not any(part.startswith(".") for part in p.relative_to(path).parts))
    return [(p, str(p.relative_to(path))) for p in found]


def read(path: Path) -> Read:
    """The memories the Markdown file (or folder of files) ``path`` becomes."""
    for file, shown in files(path):
        yield from _file(file, shown)


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
