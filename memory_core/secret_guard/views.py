"""Text rewritten for detection, with the way back to the text as given.

A secret can hide from patterns that read the text literally: zero-width characters inside a token,
full-width letters (``ＡＫＩＡ…``), another script's look-alike letters (a Cyrillic ``р`` in ``ghр_…``),
percent-encoding (``%67%68%70%5F…``). Detection runs on a :class:`View` of the text that undoes
these, and each finding is mapped back (:meth:`View.back`) to the span of the text as given, so
redaction replaces exactly what the stored text holds.

- :func:`normalised`: NFKC where it yields ASCII (full-width forms, ligatures, no-break spaces),
  invisible format characters (category Cf: zero-width space and joiners, word joiner, soft hyphen,
  BOM, direction marks) removed, and Cyrillic and Greek letters that look like Latin ones read as
  those, but only inside a token that also holds ASCII letters or digits: Russian or Greek prose
  stays as written. ASCII text is its own view at no cost.
- :func:`percent_decoded`: ``%XX`` escapes decoded (UTF-8) in one token of a text.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from dataclasses import dataclass, field
from functools import cache

from memory_core.secret_guard.findings import Finding

# Cyrillic and Greek letters drawn like Latin ones (Unicode's confusables for these scripts, letters only)
_LOOK_ALIKES = dict(zip(
    "аеорсухѕіјԁһԛԝӏАВЕКМНОРСТХУЅІЈԚԜαοριυνκχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxsijdhqwlABEKMHOPCTXYSIJQWaopiuvkxABEZHIKMNOPTYX", strict=True))
# the characters checked: the BMP, the next two planes (symbols, math alphanumerics, CJK) and the tags
# (U+E0000-E007F: invisible copies of ASCII, a known way to hide text from a reader)
_RANGES = (range(0x80, 0x30000), range(0xE0000, 0xE1000))
_LOOKS = re.compile("[" + "".join(_LOOK_ALIKES) + "]")
_TOKEN = re.compile(r"\S+")
_MIXED = re.compile(f"{_LOOKS.pattern}[A-Za-z0-9]|[A-Za-z0-9]{_LOOKS.pattern}")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")


@dataclass(frozen=True)
class Piece:
    """A stretch of the view (``start``..``end``) that replaced ``src_start``..``src_end`` of the source."""

    start: int
    end: int
    src_start: int
    src_end: int


@dataclass
class View:
    """``text`` as detection reads it; ``pieces`` (in order) are what differs from the source."""

    text: str
    pieces: list[Piece]
    _starts: list[int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._starts = [p.start for p in self.pieces]

    def _source(self, pos: int, *, end: bool) -> int:
        """The source offset of view offset ``pos`` (``end``: of the character before it, exclusive)."""
        probe = pos - 1 if end else pos
        # the last piece starting at or before it (an empty one there: a character removed just before it)
        i = bisect_right(self._starts, probe) - 1
        if i < 0:
            return pos
        p = self.pieces[i]
        if p.start <= probe < p.end:
            return p.src_end if end else p.src_start
        return pos - p.end + p.src_end

    def back(self, f: Finding) -> Finding:
        """``f`` (found in this view) as a span of the source."""
        return Finding(self._source(f.start, end=False), self._source(f.end, end=True), f.kind)


@cache
def _classes() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Invisible characters (category Cf), and those NFKC makes ASCII: built on the first non-ASCII text
    (~70 ms) from this Python's Unicode tables."""
    invisible, compatible = [], []
    for c in (chr(i) for r in _RANGES for i in r):
        if unicodedata.category(c) == "Cf":
            invisible.append(c)
        elif (n := unicodedata.normalize("NFKC", c)) != c and n.isascii():
            compatible.append(c)
    return _char_class(invisible), _char_class(compatible)


def _char_class(chars: list[str]) -> re.Pattern[str]:
    ranges: list[list[int]] = []
    for c in map(ord, chars):
        if ranges and c == ranges[-1][1] + 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    return re.compile("[" + "".join(re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "")
                                    for a, b in ranges) + "]")


def _rewrite(ch: str) -> str:
    """What an invisible or compatibility character reads as."""
    return "" if unicodedata.category(ch) == "Cf" else unicodedata.normalize("NFKC", ch)


def normalised(text: str) -> View | None:
    """The text as detection reads it, or None when that is the text itself (any ASCII text)."""
    if text.isascii():
        return None
    invisible, compatible = _classes()
    rewrites = {m.start(): "" for m in invisible.finditer(text)}
    if not unicodedata.is_normalized("NFKC", text):
        rewrites.update((m.start(), _rewrite(m.group())) for m in compatible.finditer(text))
    if _MIXED.search(text):  # look-alike letters, in tokens that also hold ASCII letters or digits
        for token in _TOKEN.finditer(text):
            word = token.group()
            if not word.isascii() and _ASCII_ALNUM.search(word):
                for m in _LOOKS.finditer(word):
                    rewrites.setdefault(token.start() + m.start(), _LOOK_ALIKES[m.group()])
    if not rewrites:
        return None
    out: list[str] = []
    pieces: list[Piece] = []
    pos = length = 0  # source consumed; view length so far
    for at in sorted(rewrites):
        new = rewrites[at]
        out.append(text[pos:at])
        length += at - pos
        pieces.append(Piece(length, length + len(new), at, at + 1))
        out.append(new)
        length += len(new)
        pos = at + 1
    out.append(text[pos:])
    return View("".join(out), pieces)


_ESCAPES = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DELIMITER = re.compile(r"[\s\"'<>]")
_DELIMITERS = " \t\n\r\"'<>"


def encoded_tokens(text: str) -> list[tuple[int, int]]:
    """The spans of the tokens of ``text`` (between whitespace, quotes and angle brackets) holding ``%XX``."""
    out: list[tuple[int, int]] = []
    for m in _ESCAPE.finditer(text):
        if out and m.start() < out[-1][1]:
            continue
        start = max(text.rfind(c, 0, m.start()) for c in _DELIMITERS) + 1
        end = _DELIMITER.search(text, m.end())
        out.append((start, end.start() if end else len(text)))
    return out


def percent_decoded(token: str) -> View | None:
    """``token`` with its ``%XX`` escapes decoded (a run that is not UTF-8 stays as it is)."""
    out: list[str] = []
    pieces: list[Piece] = []
    pos = length = 0
    for m in _ESCAPES.finditer(token):
        raw = bytes.fromhex(m.group().replace("%", ""))
        try:
            decoded = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append(token[pos:m.start()])
        length += m.start() - pos
        src = m.start()
        for ch in decoded:  # one piece per character: a span maps back to exactly its escapes
            width = 3 * len(ch.encode("utf-8"))
            pieces.append(Piece(length, length + 1, src, src + width))
            length += 1
            src += width
        out.append(decoded)
        pos = m.end()
    if not pieces:
        return None
    out.append(token[pos:])
    return View("".join(out), pieces)


__all__ = ["Piece", "View", "encoded_tokens", "normalised", "percent_decoded"]
