"""A Markdown file as the blocks the Markdown importers turn into memories, parsed by markdown-it-py
(CommonMark with tables): headings, paragraphs, list items, code blocks, tables and HTML blocks, each
with its 1-based line in the file. Front matter (YAML between ``---`` lines at the top) is split off
first and parsed with PyYAML."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from markdown_it import MarkdownIt


@dataclass(frozen=True)
class Block:
    """``kind``: heading, paragraph, item (a paragraph of a list item), code, table or html. ``text``:
    the inline source of a heading or paragraph, the source lines of the others. ``quoted``: inside
    a blockquote."""

    kind: str
    text: str
    line: int
    level: int = 0  # a heading's level
    quoted: bool = False


@dataclass(frozen=True)
class FrontMatter:
    """The YAML mapping at the top of a file (empty when there is none), the body after it and the
    body's first line; ``error`` says why the front matter could not be read (it is then ignored)."""

    data: dict[str, Any]
    body: str
    first_line: int
    error: str | None = None


def split_front_matter(text: str) -> FrontMatter:
    """Front matter is a ``---`` first line, YAML, and a closing ``---`` (or ``...``) line."""
    lines = text.split("\n")
    if not lines or lines[0].rstrip() != "---":
        return FrontMatter({}, text, 1)
    for end in range(1, len(lines)):
        if lines[end].rstrip() in ("---", "..."):
            break
    else:
        return FrontMatter({}, text, 1, "the front matter has no closing '---' line")
    body = "\n".join(lines[end + 1:])
    import yaml

    try:
        data = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        return FrontMatter({}, body, end + 2, f"the front matter is not valid YAML{where}")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return FrontMatter({}, body, end + 2, "the front matter is not a mapping of fields")
    return FrontMatter({str(k): v for k, v in data.items()}, body, end + 2)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable("table")


def blocks(body: str, first_line: int = 1) -> list[Block]:
    """The blocks of ``body`` in order (``first_line``: the file line the body starts on)."""
    lines = body.split("\n")
    out: list[Block] = []
    in_list = quoted = in_table = 0
    tokens = _parser().parse(body)
    for i, tok in enumerate(tokens):
        kind = tok.type
        if kind in ("bullet_list_open", "ordered_list_open"):
            in_list += 1
        elif kind in ("bullet_list_close", "ordered_list_close"):
            in_list -= 1
        elif kind == "blockquote_open":
            quoted += 1
        elif kind == "blockquote_close":
            quoted -= 1
        elif kind == "table_open":
            in_table += 1
            if tok.map:
                out.append(Block("table", "\n".join(lines[tok.map[0]:tok.map[1]]).strip(), tok.map[0] + first_line,
                                 quoted=quoted > 0))
        elif kind == "table_close":
            in_table -= 1
        elif kind in ("heading_open", "paragraph_open") and not in_table and tok.map:
            inline = tokens[i + 1].content if i + 1 < len(tokens) else ""
            line = tok.map[0] + first_line
            if kind == "heading_open":
                out.append(Block("heading", inline.strip(), line, level=int(tok.tag[1:]), quoted=quoted > 0))
            elif inline.strip():
                out.append(Block("item" if in_list else "paragraph", inline.strip(), line, quoted=quoted > 0))
        elif kind in ("fence", "code_block", "html_block") and tok.map:
            text = "\n".join(lines[tok.map[0]:tok.map[1]]).strip()
            if text:
                out.append(Block("html" if kind == "html_block" else "code", text, tok.map[0] + first_line,
                                 quoted=quoted > 0))
    return out
