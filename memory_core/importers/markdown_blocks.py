"""A Markdown file as the blocks the Markdown importers turn into memories, parsed by markdown-it-py
(CommonMark with tables): headings, paragraphs, list items, code blocks, tables and HTML blocks, each
with its 1-based line in the file. Front matter (YAML between ``---`` lines at the top) is split off
first and parsed with PyYAML, within bounds: a front matter whose aliases expand past
:data:`MAX_FRONT_MATTER_VALUES` values (nine levels of ``&a [*a, *a, …]`` in 600 bytes would be
hundreds of millions), that refers to itself, or nests deeper than :data:`MAX_FRONT_MATTER_DEPTH`
is refused before anything is built from it."""

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


MAX_FRONT_MATTER_VALUES = 10_000  # scalars, lists and mappings, each alias counted as what it expands to
MAX_FRONT_MATTER_DEPTH = 64


@dataclass(frozen=True)
class FrontMatter:
    """The YAML mapping at the top of a file (empty when there is none), the body after it and the
    body's first line; ``error`` says why the front matter could not be read (it is then ignored)
    and ``error_line`` the file line it is about."""

    data: dict[str, Any]
    body: str
    first_line: int
    error: str | None = None
    error_line: int = 1


class _Unbounded(Exception):
    """The front matter would build more than the bounds allow (``line``: 0-based, in the YAML text)."""

    def __init__(self, why: str, line: int) -> None:
        super().__init__(why)
        self.why, self.line = why, line


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
        data = _bounded_yaml("\n".join(lines[1:end]))
    except _Unbounded as exc:
        return FrontMatter({}, body, end + 2, f"the front matter {exc.why} (line {exc.line + 2})", exc.line + 2)
    except yaml.YAMLError as exc:
        line = _error_line(exc)
        where = f" (line {line + 2})" if line is not None else ""
        return FrontMatter({}, body, end + 2, f"the front matter is not valid YAML{where}",
                           line + 2 if line is not None else 1)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return FrontMatter({}, body, end + 2, "the front matter is not a mapping of fields")
    return FrontMatter({str(k): v for k, v in data.items()}, body, end + 2)


def _error_line(exc: Exception) -> int | None:
    """The 0-based line of a YAML error: where the construct the parser was reading starts for an
    unclosed quote or bracket (PyYAML notices those only lines later), else where it noticed."""
    context, mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if mark is not None and isinstance(context, str) and ("flow" in context or "quoted" in context):
        return int(mark.line)
    mark = getattr(exc, "problem_mark", None)
    return int(mark.line) if mark is not None else None


def _bounded_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refused (:class:`_Unbounded`) before anything is built when it would
    expand past the bounds: the composed node graph shares what aliases name, so its expanded size is
    counted once per node (memoised), in time linear in the text."""
    import yaml

    loader = yaml.SafeLoader(text)
    try:
        try:
            node = loader.get_single_node()
        except RecursionError:
            raise _Unbounded(f"nests deeper than {MAX_FRONT_MATTER_DEPTH} levels", 0) from None
        if node is None:
            return None
        _check_bounds(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_bounds(root: Any) -> None:
    """Raise :class:`_Unbounded` when the YAML node graph under ``root`` expands past the bounds."""
    import yaml

    size: dict[int, int] = {}  # id(node) -> values it expands to (done)
    open_: set[int] = set()  # nodes whose children are being counted (a cycle comes back to one)
    stack: list[tuple[Any, int, bool]] = [(root, 1, False)]
    while stack:
        node, depth, counted = stack.pop()
        if counted:
            children = _children(node)
            total = 1 + sum(size[id(c)] for c in children)
            if total > MAX_FRONT_MATTER_VALUES:
                raise _Unbounded(f"expands to more than {MAX_FRONT_MATTER_VALUES:,} values (through YAML "
                                 "aliases)", node.start_mark.line)
            size[id(node)] = total
            open_.discard(id(node))
            continue
        if id(node) in size:
            continue
        if id(node) in open_:
            raise _Unbounded("refers to itself (a YAML alias inside its own anchor)", node.start_mark.line)
        if depth > MAX_FRONT_MATTER_DEPTH:
            raise _Unbounded(f"nests deeper than {MAX_FRONT_MATTER_DEPTH} levels", node.start_mark.line)
        if isinstance(node, yaml.ScalarNode):
            size[id(node)] = 1
            continue
        open_.add(id(node))
        stack.append((node, depth, True))
        stack.extend((child, depth + 1, False) for child in _children(node))


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


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
