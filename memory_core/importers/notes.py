"""A folder of Markdown notes as its importers see it before reading any note's blocks: where the
vault's root is, which entity each note becomes, and which note a ``[[link]]`` names.

- **The vault's root** is the nearest folder at or above the imported path that holds a marker
  (:data:`VAULT_MARKERS`: ``.obsidian``, ``.git``, …), else the imported folder. Paths relative to
  it do not depend on the folder imported, so importing a subfolder and then the whole vault gives
  each note the same identity (the keys hash it), and the same session.
- **A note's entity** is named by its title (front matter ``title``, else its first ``#`` heading,
  else its file name). Two notes of one title in different folders are two entities: each is named
  ``Title (path)`` (its permalink, or its path in the vault), never merged silently (a note says so).
- **A link** ``[[Target]]`` (``[[Target|shown]]``, ``[[Target#part]]``) resolves to a note by its
  title, file name, path or permalink, or an alias its front matter declares; a title several notes
  share resolves to the one in the linking note's folder, else the first by path (noted); anything
  else is an entity of that name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from graph.api import entity_norm
from memory_core.entities.declared import MAX_NAME_CHARS
from memory_core.importers.markdown_blocks import blocks, split_front_matter
from memory_core.importers.source import Note, Where

_NOT_TEXT = re.compile("[\ud800-\udfff]")
VAULT_MARKERS = (".obsidian", ".git", ".basic-memory", ".foam", ".logseq")


def vault_root(path: Path) -> Path:
    """The folder note paths are relative to (see the module): ``path`` resolved, or the nearest folder
    above it holding a marker."""
    start = path.resolve()
    if not start.is_dir():
        start = start.parent
    for folder in (start, *start.parents):
        if any((folder / marker).exists() for marker in VAULT_MARKERS):
            return folder
    return start


@dataclass
class NoteHead:
    """What identifies a note and names its entity, read from its front matter and first heading."""

    shown: str  # as reported: relative to the imported folder
    path: str  # relative to the vault's root, without the suffix (posix)
    title: str
    permalink: str | None  # front matter permalink (or id), as the source tool keys the note
    aliases: list[str] = field(default_factory=list)
    entity: str = ""  # the entity's name: the title, or "Title (path)" when several notes share the title

    @property
    def identity(self) -> str:
        """What a key hashes for this note: its permalink (or id) when the front matter has one, else its
        path in the vault; either is the same whichever folder is imported."""
        return f"permalink:{self.permalink}" if self.permalink else f"path:{self.path}"

    @property
    def folder(self) -> str:
        return str(PurePosixPath(self.path).parent)


def read_head(text: str, shown: str, vault_path: str) -> NoteHead:
    """The note's head: front matter title/permalink/aliases, else its first ``#`` heading, else its name."""
    front = split_front_matter(text)
    data = front.data if front.error is None else {}
    heading = next((b.text for b in blocks(front.body, front.first_line) if b.kind == "heading" and b.level == 1),
                   None)
    title = " ".join(str(data.get("title") or heading or PurePosixPath(shown).stem).split())[:MAX_NAME_CHARS]
    title = _NOT_TEXT.sub("\ufffd", title)  # a byte that is not UTF-8 (its block is refused) names no entity
    link = data.get("permalink") or data.get("id")
    permalink = " ".join(str(link).split()) if isinstance(link, str | int) and str(link).strip() else None
    return NoteHead(shown, vault_path, title or PurePosixPath(shown).stem, permalink, _aliases(data.get("aliases")))


def _aliases(value: Any) -> list[str]:
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    return [" ".join(str(a).split())[:MAX_NAME_CHARS] for a in items if isinstance(a, str | int) and str(a).strip()]


class NoteIndex:
    """The notes of one import, by what a link or a report may name them by (see the module)."""

    def __init__(self, heads: Iterable[NoteHead]) -> None:
        self.heads = {h.shown: h for h in heads}
        by_title: dict[str, list[NoteHead]] = {}
        for head in sorted(self.heads.values(), key=lambda h: h.path):
            by_title.setdefault(entity_norm(head.title), []).append(head)
        self.shared_titles: dict[str, list[NoteHead]] = {}
        for norm, same in by_title.items():
            for head in same:
                head.entity = head.title if len(same) == 1 else _apart(head)
            if len(same) > 1:
                self.shared_titles[norm] = same
        self._names: dict[str, list[NoteHead]] = {}
        for head in sorted(self.heads.values(), key=lambda h: h.path):
            names = {head.title, head.entity, head.path, PurePosixPath(head.path).name, *head.aliases}
            if head.permalink:
                names.add(head.permalink)
            for name in names:
                self._names.setdefault(entity_norm(name), []).append(head)

    def notes(self) -> Iterator[Note]:
        """A note for each title several notes share (they are kept apart)."""
        for same in self.shared_titles.values():
            names = ", ".join(repr(h.entity) for h in same)
            yield Note(Where(same[0].shown), f"{len(same)} notes are titled {same[0].title!r}; they are kept apart as "
                                             f"{names}")

    def head(self, shown: str) -> NoteHead | None:
        return self.heads.get(shown)

    def resolve(self, target: str, linking: NoteHead) -> tuple[str, str | None]:
        """(the entity a link names, a remark when it was ambiguous) for ``[[target]]`` in ``linking``."""
        found = self._names.get(entity_norm(target)) or self._names.get(entity_norm(target.removesuffix(".md")))
        if not found:
            return target, None
        distinct = {h.shown: h for h in found}
        if len(distinct) == 1:
            return found[0].entity, None
        near = [h for h in distinct.values() if h.folder == linking.folder]
        chosen = near[0] if len(near) == 1 else sorted(distinct.values(), key=lambda h: h.path)[0]
        return chosen.entity, (f"[[{target}]] may name {len(distinct)} notes; it is linked to {chosen.entity!r}"
                               + (" (in the same folder)" if len(near) == 1 else " (the first by path)"))


def _apart(head: NoteHead) -> str:
    """The name of a note whose title another note has too: the title and what tells it apart."""
    suffix = f" ({head.permalink or head.path})"
    return head.title[: MAX_NAME_CHARS - len(suffix)] + suffix


def wikilinks(text: str) -> list[str]:
    """The targets of the ``[[links]]`` in ``text`` (outermost, in order: a ``[[`` to the first ``]]`` after
    it on the same line), without display text or heading, in one forward pass: 50,000 ``[[`` and no
    ``]]`` cost one scan, not one each."""
    out: list[str] = []
    end = newline = -1  # the first "]]" / newline at or after the current link's text (kept while valid)
    start = text.find("[[")
    while start != -1:
        if end < start + 3:  # a link holds at least one character
            end = text.find("]]", start + 3)
            if end == -1:
                break
        if newline < start:
            newline = text.find("\n", start)
            newline = len(text) if newline == -1 else newline
        if end > newline:  # no "]]" closes it on its line: the next "[[" may open one
            start = text.find("[[", start + 1)
            continue
        target = link_target(text[start + 2:end])
        if target and target not in out:
            out.append(target)
        start = text.find("[[", end + 2)
    return out


def link_target(raw: str) -> str:
    """A link target without its display text (``[[Note|shown]]``) or heading (``[[Note#Part]]``)."""
    return " ".join(raw.split("|", 1)[0].split("#", 1)[0].split())[:MAX_NAME_CHARS]
