"""The records of a JSON source file, in linear time and bounded memory, each with the line it starts on.

A file is either **one JSON document** — an array of records, or an object whose arrays under
``record_keys`` hold them (``{"results": [...], "relations": [...]}``) — or **JSON Lines**, one record
a line. :func:`records` tells them apart by the first value's shape (an array, or an object whose first
key is one of ``document_keys``), then yields every record as a :class:`Record`.

What no source may do is crash the reader or make it slow, so each record is decoded on its own:

- a record that is not JSON, nested deeper than the JSON decoder goes (``[[[[…`` 200,000 deep), or
  holding a number of more digits than Python converts, becomes a :class:`Problem` naming its file
  and line, and the reader goes on with the next one (in a document, past the record's closing
  bracket, found by a scan that does not recurse);
- text that is not UTF-8 (:func:`memory_core.importers.source.read_text` keeps a bad byte in place)
  or a ``\\ud800`` escape with no partner (a lone surrogate, which no UTF-8 store can hold) refuses
  the record, naming the field;
- line numbers are counted once, forward, never from the file's start for every record.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from memory_core.importers.source import Problem, Where, undecodable

_decoder = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\r\n]*")
_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)  # strings (skipped whole) and brackets
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")  # how a surrogate is written in JSON text


@dataclass(frozen=True)
class Record:
    """One value of the file: a record (``key``: the document's array it is in, ``None`` for a
    top-level array or a JSON line) or, with ``top``, another field of a document object (its
    ``key`` and value: ``count``, ``next``, …). ``value`` is the decoded JSON, or the Problem."""

    where: Where
    key: str | None
    value: Any
    top: bool = False


def records(text: str, shown: str, *, document_keys: frozenset[str], record_keys: frozenset[str]) -> Iterator[Record]:
    """Every record of ``text`` (the file ``shown``), in file order (see the module)."""
    start = _skip(text, 0)
    if start < len(text) and (text[start] == "[" or (text[start] == "{" and _first_key(text, start) in document_keys)):
        doc = _Document(text, shown)
        yield from doc.array(start, None) if text[start] == "[" else doc.object(start, record_keys)
        if doc.end != -1 and _skip(text, doc.end) < len(text):
            yield doc.broken(_skip(text, doc.end), "Not JSON: more text after the document")
    else:
        yield from _lines(text, shown)


def unencodable(text: str, value: Any, where: Where, *, span: tuple[int, int] | None = None) -> Problem | None:
    """The Problem of a record whose text holds a byte that is not UTF-8 (in ``text[span]``) or whose
    decoded ``value`` holds a lone surrogate (naming the field), else None."""
    start, end = span or (0, len(text))
    bad = undecodable(text, where, start, end)
    if bad is not None:
        return bad
    path = lone_surrogate(value) if _SURROGATE_ESCAPE.search(text, start, end) else None
    if path is not None:
        return Problem(where.at(path) if path else where,
                       f"{f'{path!r}' if path else 'The record'} holds a lone surrogate (a \\ud800-\\udfff escape "
                       "without its pair): it is not valid Unicode and cannot be stored.")
    return None


def lone_surrogate(value: Any) -> str | None:
    """The path (``metadata.note``, ``observations[2]``; ``""`` for the value itself) of the first string
    or key of a JSON value holding a lone surrogate, or None. Iterative: any depth the decoder read."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path
        elif isinstance(item, dict):
            for key, sub in reversed(list(item.items())):
                if _SURROGATE.search(key):
                    return path or "(a key)"
                stack.append((f"{path}.{key}" if path else key, sub))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return None


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def _first_key(text: str, pos: int) -> str | None:
    """The first key of the object at ``pos`` (None when it has none or it cannot be read)."""
    pos = _skip(text, pos + 1)
    if pos >= len(text) or text[pos] != '"':
        return None
    try:
        key, _end = _decoder.raw_decode(text, pos)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _value_end(text: str, pos: int) -> int:
    """Where the JSON value at ``pos`` ends, found without decoding it (no recursion); -1 if it never does."""
    if pos >= len(text):
        return -1
    if text[pos] not in "[{":
        if text[pos] == '"':
            match = _BRACKETS.match(text, pos)
            return match.end() if match else -1
        match = _NUMBER.match(text, pos)
        return match.end() if match else -1
    depth = 0
    for match in _BRACKETS.finditer(text, pos):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
            if depth == 0:
                return match.end()
    return -1


class Decoded(NamedTuple):
    """A value read at a position: ``why`` says why it could not be (then ``value`` is None), and
    ``field`` which field of it when one is at fault; ``end`` is where it ends, -1 when the text past
    its start cannot be followed (a syntax error at ``error_at``)."""

    value: Any
    end: int
    why: str | None = None
    error_at: int = -1
    field: str | None = None

    def problem(self, where: Where) -> Problem:
        """The Problem of a value that could not be read, at ``where`` (its field named)."""
        return Problem(where.at(self.field) if self.field else where, f"{self.why}.")


def decode_at(text: str, pos: int = 0) -> Decoded:
    """The JSON value at ``pos`` (see :class:`Decoded`): never raises, never recurses past the
    interpreter's limit, and names the field (up to three levels of objects down) that is too deep."""
    try:
        value, end = _decoder.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        column = exc.pos - (text.rfind("\n", 0, exc.pos) + 1) + 1
        return Decoded(None, -1, f"Not JSON: {exc.msg} (column {column})", exc.pos)
    except (RecursionError, ValueError) as exc:  # ValueError: an integer of more digits than Python converts
        field = _culprit(text, pos)
        what = f"'{field}'" if field else "It"
        why = (f"{what} is nested deeper than the JSON reader goes" if isinstance(exc, RecursionError)
               else f"{what} cannot be read ({exc})")
        return Decoded(None, _value_end(text, pos), why, field=field)
    return Decoded(value, end)


def _culprit(text: str, pos: int, depth: int = 0) -> str | None:
    """The path of the field of the object at ``pos`` whose value the decoder cannot read (None if it is
    not an object, or the fault is not in one field); only taken when a record already failed."""
    if depth >= 3 or pos >= len(text) or text[pos] != "{":
        return None
    at = _skip(text, pos + 1)
    while at < len(text) and text[at] == '"':
        try:
            key, end = _decoder.raw_decode(text, at)
            at = _skip(text, end)
            if text[at:at + 1] != ":":
                return None
            at = _skip(text, at + 1)
            _value, end = _decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            return None
        except (RecursionError, ValueError):
            inner = _culprit(text, at, depth + 1)
            return f"{key}.{inner}" if inner else str(key)
        at = _skip(text, end)
        if text[at:at + 1] == ",":
            at = _skip(text, at + 1)
    return None


class _Document:
    """Walks one JSON document's records, counting lines forward; ``end`` is where the last array
    walked ends (-1: the document breaks off there, and nothing after it can be read)."""

    def __init__(self, text: str, shown: str) -> None:
        self.text, self.shown = text, shown
        self._pos, self._line = 0, 1
        self.end = -1

    def line(self, pos: int) -> int:
        """The 1-based line of ``pos`` (positions only grow: each newline is counted once)."""
        self._line += self.text.count("\n", self._pos, pos)
        self._pos = pos
        return self._line

    def broken(self, pos: int, why: str) -> Record:
        """The Problem that ends the walk at ``pos`` (nothing after it can be placed)."""
        self.end = -1
        where = Where(self.shown, self.line(pos))
        return Record(where, None, Problem(where, f"{why}; the file is read no further."))

    def array(self, pos: int, key: str | None) -> Iterator[Record]:
        """The records of the array at ``pos``."""
        text = self.text
        self.end = -1
        pos = _skip(text, pos + 1)
        index = 0
        while pos < len(text) and text[pos] != "]":
            where = Where(self.shown, self.line(pos), f"{key}[{index}]" if key else f"[{index}]")
            got = decode_at(text, pos)
            end = got.end
            if end == -1:
                yield self.broken(max(got.error_at, pos), got.why or "Not JSON")
                return
            if got.why is not None:
                yield Record(where, key, got.problem(where))
            else:
                yield Record(where, key, unencodable(text, got.value, where, span=(pos, end)) or got.value)
            index += 1
            pos = _skip(text, end)
            if pos < len(text) and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif pos < len(text) and text[pos] != "]":
                yield self.broken(pos, "Not JSON: expected ',' or ']' after a record")
                return
        if pos >= len(text):
            yield self.broken(pos, "Not JSON: the array has no closing ']'")
            return
        self.end = pos + 1

    def object(self, pos: int, record_keys: frozenset[str]) -> Iterator[Record]:
        """The records of the arrays under ``record_keys`` and the other top-level fields, in order."""
        text = self.text
        pos = _skip(text, pos + 1)
        while pos < len(text) and text[pos] != "}":
            key, end = decode_at(text, pos)[:2]
            if not isinstance(key, str):
                yield self.broken(pos, "Not JSON: expected a key")
                return
            pos = _skip(text, end)
            if pos >= len(text) or text[pos] != ":":
                yield self.broken(pos, "Not JSON: expected ':' after a key")
                return
            pos = _skip(text, pos + 1)
            if key in record_keys and pos < len(text) and text[pos] == "[":
                yield from self.array(pos, key)
                end = self.end
                if end == -1:
                    return
            else:
                where = Where(self.shown, self.line(pos), key)
                got = decode_at(text, pos)
                end = got.end
                if end == -1:
                    yield self.broken(max(got.error_at, pos), got.why or "Not JSON")
                    return
                yield Record(where, key, got.problem(where) if got.why is not None else got.value, top=True)
            pos = _skip(text, end)
            if pos < len(text) and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif pos < len(text) and text[pos] != "}":
                yield self.broken(pos, "Not JSON: expected ',' or '}' after a field")
                return
        if pos >= len(text):
            yield self.broken(pos, "Not JSON: the object has no closing '}'")
            return
        self.end = pos + 1


def _lines(text: str, shown: str) -> Iterator[Record]:
    """JSON Lines: one record a line (``\\n`` ends a line; a JSON string may hold U+2028 and the like)."""
    for number, line in enumerate(text.split("\n"), 1):
        start = _skip(line, 0)
        if start >= len(line):
            continue
        where = Where(shown, number)
        got = line_value(line)
        if isinstance(got, Decoded):
            yield Record(where, None, got.problem(where))
            continue
        yield Record(where, None, unencodable(line, got, where) or got)


def line_value(line: str) -> Any:
    """The one JSON value a line holds, or the :class:`Decoded` saying why it cannot be read."""
    start = _skip(line, 0)
    got = decode_at(line, start)
    if got.why is None and _skip(line, got.end) < len(line):
        return Decoded(None, -1, f"Not JSON: extra data after the value (column {_skip(line, got.end) + 1})")
    return got if got.why is not None else got.value
