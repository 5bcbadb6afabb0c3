"""basic-memory notes: a folder of Markdown files, each a note with YAML front matter, observations
and relations::

    ---
    title: Coffee Brewing Methods
    type: note
    tags: [coffee, brewing]
    permalink: coffee-brewing-methods
    ---
    # Coffee Brewing Methods
    - [method] Pour over gives more clarity than a French press #brewing (personal experience)
    - relates_to [[Coffee Bean Origins]]
    Prose that links [[Tea Brewing Methods]] inline.

Mapping: each note is a session named by its permalink (else its path) and an ENTITY named by its
title (front matter, else its first ``#`` heading, else the file name), of its ``type`` as kind
(``note`` by default). Every block of the note becomes a memory that
mentions the note's entity:

- an observation ``- [category] text #tag (context)`` -> a memory ``text (context)`` whose type is
  the category when it can be one (``decision``, ``idea``, …; never turn/handoff/episode, else
  ``note``), with category, tags and context in metadata;
- a relation ``- relation_type [[Target]] (context)`` -> a memory ``<title> relation_type <Target>``
  declaring the relation from the note's entity to the target's;
- every other paragraph, list item, code block or table -> a memory of type ``note``;
- a ``[[link]]`` inside any of them -> a ``links_to`` relation from the note to the target.

Front matter title, type, tags and permalink (and the note's file) go into every memory's metadata.
The memories' time is the note's: front matter ``modified``/``updated``, else the file's
modification time (plus one microsecond per block, so they keep the note's order); ``created``
(or ``date``) is kept in metadata. The observation and relation syntax follows basic-memory's own
parser (a ``[ ]``/``[x]`` task is not an observation; a bracketed time is not a category; a
multi-word relation type must be quoted). Keys hash the permalink and the text.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

from graph.api import entity_norm
from memory_core.entities.declared import MAX_NAME_CHARS, MAX_RELATIONS
from memory_core.importers.markdown import files, head
from memory_core.importers.markdown_blocks import Block, blocks, split_front_matter
from memory_core.importers.notes import NoteHead, NoteIndex, link_target, vault_root, wikilinks
from memory_core.importers.source import (
    Note,
    Problem,
    Read,
    SourceItem,
    Where,
    entity_kind,
    file_time,
    memory_type,
    parse_time,
    read_text,
    relation_words,
    safe_name,
    slug,
    source_key,
    undecodable,
)
from memory_core.validation import NAME_PATTERN

NAME = "basic-memory"
LINKS_TO = "links_to"
_CATEGORY = re.compile(r"^\[([^\[\]()]+)\]\s+(.+)$", re.S)
_TIME = re.compile(r"^\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?(?:\s+-\s+\d{1,3}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?)?$")


def read(path: Path) -> Read:
    """The memories the basic-memory project folder (or single note) ``path`` becomes (links in it are
    not followed: see :func:`memory_core.importers.markdown.files`)."""
    root = vault_root(path)
    found: list[tuple[Path, str]] = []
    for entry in files(path):
        if isinstance(entry, Note):
            yield entry
        else:
            found.append(entry)
    index = NoteIndex(head(file, shown, root) for file, shown in found)  # titles first: links resolve by them
    yield from index.notes()
    for file, shown in found:
        yield from _note(file, shown, index)


def _note(file: Path, shown: str, index: NoteIndex) -> Read:
    text = read_text(file, shown)
    this = index.head(shown)
    if isinstance(text, Problem) or this is None:
        yield text if isinstance(text, Problem) else Problem(Where(shown), "The file changed while it was read.")
        return
    front = split_front_matter(text)
    if front.error is not None:
        yield Problem(Where(shown, front.error_line, "front matter"), f"{front.error[:1].upper()}{front.error[1:]}.")
        return
    fm = front.data
    parts = blocks(front.body, front.first_line)
    heading = next((b.text for b in parts if b.kind == "heading" and b.level == 1), None)
    title = " ".join(str(fm.get("title") or heading or Path(shown).stem).split())[:MAX_NAME_CHARS]
    permalink = str(fm.get("permalink") or "").strip()
    session = safe_name(permalink) if permalink and NAME_PATTERN.match(permalink) else "/".join(
        slug(part, 40) for part in Path(shown).with_suffix("").parts)
    note_type = str(fm.get("type") or "note")
    note_entity: dict[str, Any] = {"name": this.entity, "kind": entity_kind(note_type) or "note"}
    modified = parse_time(fm.get("modified") or fm.get("updated")) or file_time(file)
    created = parse_time(fm.get("created") or fm.get("date"))
    meta: dict[str, Any] = {"title": title, "permalink": permalink or session, "type": note_type,
                            "tags": _tags(fm.get("tags")), "file": shown}
    if created is not None:
        meta["created"] = created.isoformat()
    meta["modified"] = modified.isoformat()
    seen: Counter[str] = Counter()
    for number, block in enumerate(b for b in parts if b.kind != "heading"):
        where = Where(shown, block.line)
        bad = undecodable(block.text, where)
        if bad is not None:  # this block is refused; the rest of the note is read
            yield bad
            continue
        item = _item(block, title, note_entity, meta, index, this)
        for remark in item["remarks"]:
            yield Note(where, remark)
        if len(item["relations"]) > MAX_RELATIONS:
            yield Note(where, f"the block links {len(item['relations'])} notes; the first {MAX_RELATIONS} are kept")
            item["relations"] = item["relations"][:MAX_RELATIONS]
            item["entities"] = item["entities"][:MAX_RELATIONS + 1]
        seen[item["content"]] += 1
        legacy = source_key(NAME, session, item["kind"], item["content"], seen[item["content"]])
        yield SourceItem(item["kind"], where, item["content"], session, modified + timedelta(microseconds=number),
                         (session, item["kind"], seen[item["content"]]), item["type"], metadata={NAME: item["meta"]},
                         entities=item["entities"], relations=item["relations"], legacy_keys=(legacy,))


def _tags(value: object) -> list[str]:
    if isinstance(value, str):
        return [t.strip() for t in value.split(",") if t.strip()]
    if isinstance(value, list):
        return [str(t) for t in value if t is not None]
    return []


def _item(block: Block, title: str, note: dict[str, Any], meta: dict[str, Any], index: NoteIndex,
          this: NoteHead) -> dict[str, Any]:
    """One block as a memory: kind, content, type, metadata, entities, relations, and remarks about the
    links it holds (a ``[[link]]`` names the entity of the note it resolves to in ``index``)."""
    out: dict[str, Any] = {"kind": block.kind if block.kind in ("code", "table", "html") else "paragraph",
                           "content": block.text, "type": "note", "meta": dict(meta)}
    targets: list[tuple[str, str]] = []  # (relation type, target)
    if block.kind == "item" and not block.quoted:
        explicit = _explicit_relation(block.text)
        observation = None if explicit else _observation(block.text)
        if explicit is not None:
            rel_type, target, context = explicit
            out.update(kind="relation", content=f"{title} {relation_words(rel_type)} {target}"
                       + (f" ({context})" if context else ""))
            out["meta"]["relation"] = {"type": rel_type, "target": target, "context": context}
            targets.append((rel_type, target))
        elif observation is not None:
            category, content, tags, context = observation
            out.update(kind="observation", content=content + (f" ({context})" if context else ""),
                       type=memory_type(category))
            out["meta"].update(category=category, observation_tags=tags, context=context)
        else:
            out["kind"] = "item"
    if block.kind in ("paragraph", "item") and out["kind"] != "relation":
        targets += [(LINKS_TO, t) for t in wikilinks(block.text) if (LINKS_TO, t) not in targets]
    entities = [note]
    relations = []
    out["remarks"] = []
    for rel_type, target in targets:
        name, remark = index.resolve(target, this)
        if remark is not None:
            out["remarks"].append(remark)
        if entity_norm(name) == entity_norm(note["name"]) or entity_norm(target) == entity_norm(title):
            continue
        if not any(entity_norm(e["name"]) == entity_norm(name) for e in entities):
            entities.append({"name": name})
        relations.append({"from": note["name"], "to": name, "label": rel_type})
    out["entities"], out["relations"] = entities, relations
    return out


def _observation(text: str) -> tuple[str | None, str, list[str], str | None] | None:
    """(category, content, tags, context) of ``- [category] content #tag (context)``, as basic-memory reads it."""
    if text.startswith(("[ ]", "[x]", "[X]", "[-]")) or _only_link(text):
        return None
    category = None
    content = text
    match = _CATEGORY.match(text)
    if match and not _TIME.match(match.group(1).strip()) and not _task_marker(match.group(1).strip()):
        category, content = match.group(1).strip(), match.group(2).strip()
    elif not any(part.startswith("#") for part in text.split()):
        return None
    context = None
    if content.endswith(")") and "(" in content:
        start = content.rfind("(")
        context, content = content[start + 1:-1].strip() or None, content[:start].strip()
    tags = [t for part in content.split() if part.startswith("#") for t in part.split("#") if t]
    return (category, content, tags, context) if content else None


def _only_link(text: str) -> bool:
    """Whether the one-line ``text`` is a Markdown link ``[shown](target)`` or a ``[[wikilink]]`` and
    nothing else (string tests: a lazy regex would cost a scan per ``](``)."""
    if "\n" in text or not text.startswith("["):
        return False
    if text.startswith("[[") and text.endswith("]]") and len(text) >= 4:
        return True
    middle = text.find("](", 1)
    return text.endswith(")") and middle != -1 and middle + 2 <= len(text) - 1


def _task_marker(category: str) -> bool:
    return len(category) == 1 and (category in "xX" or not category.isalnum())


def _explicit_relation(text: str) -> tuple[str, str, str | None] | None:
    """(type, target, context) of ``- relation_type [[Target]] (context)``; a multi-word type must be quoted."""
    start = text.find("[[")
    end = text.find("]]", start + 2)
    if start <= 0 or end == -1:
        return None
    rel_type = text[:start].strip()
    if rel_type[:1] in ("'", '"') and len(rel_type) > 1 and rel_type.endswith(rel_type[0]):
        rel_type = rel_type[1:-1].strip()
    elif any(c.isspace() for c in rel_type):
        return None
    target = link_target(text[start + 2:end])
    after = text[end + 2:].strip()
    if not rel_type or not target or (after and not (after.startswith("(") and after.endswith(")")
                                                      and after.count("(") == 1)):
        return None
    context = (after[1:-1].strip() or None) if after else None
    return rel_type, target, context
