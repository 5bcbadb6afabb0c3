"""The deterministic entity extractor that runs on every add (and on every recall query).

``extract_entities(text)`` finds what a memory is *about* without a model:

- ``name``: capitalised words and phrases of up to four words ("Caroline", "LGBTQ support
  group" -> "LGBTQ", "José García", "New York"), minus sentence-initial stop words ("The",
  "Hey", "Yesterday"; a sentence also starts after a Markdown list, task or quote marker, "- [ ] Ask…",
  and in a table cell), adverbs ("Honestly") and interjections ("Aww", "Woahhh": "Aww John"
  gives "John"), and words that are capitalised only because a sentence starts there
  and read as ordinary words; a possessive ``'s`` is not part of the name;
- ``handle``: ``@bob``, ``@team.infra`` (an e-mail address is not a handle);
- ``url``: ``http(s)://...`` without trailing punctuation;
- ``email``: ``ana@example.org``;
- ``path``: ``src/app/main.py``, ``~/.config/x``, ``/var/log/syslog``, ``README.md``;
- ``identifier``: ``ERR_CONN_RESET``, ``payments-api``, ``getUserById``, ``v2.3.1``, anything
  in backticks;
- ``date``: ``2023-05-08``, ``8 May 2023``, ``May 8, 2023``, ``May 2023`` (ISO ``YYYY-MM-DD``
  as its key when the day is known).

Every entity carries ``key``: its name normalised (NFC, case-folded, whitespace collapsed),
so "Payments-API", "payments-api" and "payments‑api " resolve to one entity.

Cost is linear in the text: it is split once on whitespace and each chunk is classified by
cheap character tests before any (anchored, length-capped) regex runs; capitalised phrases
are grouped from the chunk sequence, never by a regex over the text. Chunks longer than
``MAX_CHUNK`` characters (a URL may reach ``MAX_URL``) and mentions past ``MAX_MENTIONS``
are ignored, so 100 kB of capitals costs what 100 kB of prose does.
"""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

MAX_CHUNK = 128  # longer whitespace-free runs are not names, paths or identifiers
MAX_URL = 2048
MAX_PHRASE = 4  # words in one capitalised phrase
MAX_MENTIONS = 256  # per text

KINDS = ("name", "handle", "url", "email", "path", "identifier", "date")

# a whitespace-free chunk with a character other than lowercase ASCII letters and light punctuation,
# matched only from a chunk's start (the lookbehind keeps a long run from being rescanned at every offset)
_INTERESTING = re.compile(r"(?<!\S)[a-z.,;:!?'\"()]*[^\sa-z.,;:!?'\"()]\S*")
_DIGIT = re.compile(r"\d")
_TITLES = frozenset("Dr. Mr. Mrs. Ms. Mx. Prof. St. Sr. Jr. Mt. Gen. Capt. Sgt. Rev. Hon.".split())
_LEAD = "\"'([{<«“‘*_"
_TRAIL = "\"'.,;:!?)]}>»”’*…"
_WORD = re.compile(r"\w+(?:['’&.-]\w+)*")  # one word of a capitalised phrase (O'Neil, Jean-Luc, A.I)
_HANDLE = re.compile(r"@\w[\w.-]{0,63}")
_EMAIL = re.compile(r"[\w.+-]{1,64}@\w[\w-]*(?:\.[\w-]+)+")
_URL = re.compile(r"(?:https?|ftp)://\S+", re.IGNORECASE)
_PATH = re.compile(r"(?:~|\.{1,2})?/?(?:[\w@+.-]+/)+[\w@+.-]*|[\w-]+(?:\.[\w-]+)*\.[A-Za-z][A-Za-z0-9]{0,5}")
_SNAKE = re.compile(r"\w*[A-Za-z]\w*_\w+|_\w*[A-Za-z]\w*")  # ERR_CONN_RESET, user_id, __init__
_CAMEL = re.compile(r"[a-z]+[A-Z]\w*")  # getUserById, iPhone (PostgreSQL, McDonald read as names)
_KEBAB = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)+")
_VERSION = re.compile(r"v?\d+(?:\.\d+){1,3}[a-z0-9]*|[A-Za-z]+\d+[A-Za-z0-9]*|\d+[A-Za-z]+\d\w*")
_BACKTICK = re.compile(r"`([^`\n]{1,128})`")
# what a Markdown list item, task, quote or table row starts with, before its first word
_MARKERS = re.compile(r"[ \t]*(?:(?:[-*+>|]|\d{1,9}[.)])[ \t]+)*(?:\[[ xX]\][ \t]+)?")
_MARKER_WINDOW = 24

# file name extensions that make "word.ext" a path (others read as a sentence's end: "ok.Then")
_EXTENSIONS = frozenset(
    "py pyi js ts tsx jsx mjs cjs json toml yaml yml ini cfg conf md rst txt csv tsv log sql sh bash zsh "
    "rs go java kt c h cc cpp hpp cs rb php swift lua r pl html htm css scss xml lock env db sqlite "
    "png jpg jpeg gif svg pdf zip gz tar whl ipynb proto tf dockerfile makefile".split())
# parts that make a kebab-case word a service or tool name rather than an English compound
_TECH_PARTS = frozenset(
    "api apis svc service services server client worker workers db cache queue bus gateway proxy app web "
    "ui cli sdk lib core mcp rpc http grpc auth config cron job jobs bot agent prod staging dev test tests "
    "ci cd io js py ts v1 v2 v3 k8s node pod cluster bucket topic stream index store backend frontend".split())
_MONTHS = {m: i for i, m in enumerate(
    "january february march april may june july august september october november december".split(), 1)}
_MONTH_NAMES = frozenset(_MONTHS)
_MONTHS.update({m[:3]: i for m, i in list(_MONTHS.items())})
_MONTHS["sept"] = 9
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_DATE = re.compile(
    r"(?<![\w-])(?:(\d{4})-(\d{2})-(\d{2})"
    r"|(\d{1,2})(?:st|nd|rd|th)?\s(?:of\s)?([A-Za-z]{3,9})\.?,?\s(\d{4})"
    r"|([A-Za-z]{3,9})\.?\s(\d{1,2})(?:st|nd|rd|th)?,?\s(\d{4})"
    r"|([A-Za-z]{3,9})\.?,?\s(\d{4}))(?![\w-])")
_CONTRACTIONS = ("n't", "'ve", "'ll", "'d", "'re", "'m", "n’t", "’ve", "’ll", "’d", "’re", "’m")
# capitalised words that are not names anywhere (they end a phrase)
_NEVER = frozenset("i i'm i've i'd i'll ok okay none true false null nan".split())  # ... or literals of code
# words capitalised only because a sentence starts with them: dropped there (mid-sentence, "New York" keeps "New")
_STOP = frozenset("""
a an the this that these those there here it its it's i i'm i've i'd i'll me my mine we we're we've our ours
you you're your yours he he's him his she she's her hers they they're them their theirs who what when where
why how which whose whom yes no not ok okay oh hey hi hello thanks thank bye wow yeah yep nope sure well so
and or but if then than also just only even still yet because though although while since until unless as at
by for from in into of off on onto out over to up upon with within without about after before between during
do does did done don't doesn't didn't is are was were be been being am isn't aren't wasn't weren't have has
had having haven't hasn't can can't could couldn't will won't would wouldn't shall should shouldn't may might
must let let's please maybe perhaps actually really definitely absolutely totally great good nice cool awesome
amazing sounds sound glad happy sorry lol haha congrats congratulations today tomorrow yesterday tonight now
later soon recently lately anyway besides plus all any some every each both either neither none many much more
most few other another such same own very too quite rather almost always never sometimes often usually
one two three first second last next new old dear love oops ah um uh hmm wait look see note fyi btw imo
use used using check checked try tried run ran make made get got go went going went come came take took
give gave keep kept add added fix fixed remember remembered ping call called ask asked tell told send sent
think thought know knew feel felt want wanted need needed like liked hope hoped guess mean meant said says
said found find start started stop stopped set read write wrote open close moved move update updated
speaking talking working playing painting reading writing running looking thinking having being getting
what's that's there's here's how's where's who's nothing something everything anything someone everyone
upgrade install deploy merge rename restart revert release remove delete create build test debug
yours truly anyway agreed right exactly true indeed interesting sad fun funny hard easy wonderful beautiful
gonna wanna gotta gotcha lemme kinda sorta dunno ain't y'all cheers bravo hooray hurray gosh geez jeez
yikes dang darn welp alright anyways anytime whenever however meanwhile otherwise kudos bummer
""".split())
# a sentence-initial adverb ("Honestly", "Hopefully", "Unfortunately"): by its suffix, not a list; a
# plain "-ly" would take Emily, Kelly and Holly too
_ADVERB = re.compile(r"\w{2,}(?:ally|fully|ately|ously|ently|antly|ably|ibly|ively|itely|ingly|edly|estly|essly"
                     r"|ctly|ghly)")
# interjections however drawn out ("Aww", "Woahhh", "Mmm", "Hahaha", "Ooh", "Phew"): at a sentence's
# start they are no name, and "Aww John" must give John, not "Aww John"
_INTERJECTION = re.compile(
    r"a+w+|a+h+|o+h+|o+o+h*|m+|h+m+|u+g+h+|a+r+g+h+|w+o+a+h+|w+h+o+a+|y+a+y+|w+o+o+(?:h+o+o+)?|w+o+w+|"
    r"(?:h+a+)+h*|a+h+a+[ha]*|l+o+l+|y+u+p+|y+u+m+|o+o+f+|o+u+c+h+|p+h+e+w+|w+h+e+w+|n+a+h+|y+e+a+h*|"
    r"y+a+s+|e+e+k+|u+m+|u+h+|e+r+m+|m+e+h+|o+m+g+|w+o+o+t+|y+e+s+s+")


class ExtractedEntity(NamedTuple):
    """One mention: the entity's surface ``name``, its ``kind``, its ``span`` in the text, its ``key``."""

    name: str
    kind: str
    span: tuple[int, int]
    key: str


def normalise_name(name: str) -> str:
    """The key aliases share: NFC, case-folded, inner whitespace collapsed, outer stripped; dashes unified."""
    if name.isascii():
        return " ".join(name.lower().split())
    folded = unicodedata.normalize("NFC", name).casefold().translate(_DASHES)
    return " ".join(folded.split())


_DASHES = str.maketrans({c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2212"})


def extract_entities(text: str) -> list[ExtractedEntity]:
    """Every entity ``text`` mentions, in text order (see the module docstring for the kinds)."""
    if not isinstance(text, str) or not text:
        return []
    out: list[ExtractedEntity] = []
    taken = (_dates(text, out) if _DIGIT.search(text) else []) + _backticks(text, out)  # no chunk claims these
    taken.sort()
    next_taken = 0
    phrase: list[tuple[str, int, int]] = []  # the capitalised phrase being built: (word, start, end)
    prev_end, prev_raw = -1, ""
    # only chunks holding something other than lowercase ASCII and light punctuation can be (part of) an
    # entity; the plain words between them are skipped in C, and only their boundaries are looked at
    for chunk in _INTERESTING.finditer(text):
        if len(out) >= MAX_MENTIONS:
            break
        raw, c0, c1 = chunk.group(), chunk.start(), chunk.end()
        gap = c0
        while gap and text[gap - 1].isspace():
            gap -= 1
        titled = gap == prev_end and prev_raw in _TITLES
        if gap != prev_end or "\n" in text[gap:c0] or (not titled and prev_raw[-1:] in ".!?:;…"):
            _close(text, phrase, out)
        before = text[gap - 1] if gap else "."
        sentence_start = not titled and (before in ".!?:;…\n|" or "\n" in text[gap:c0] or (before in "\"”)'’"
                                         and gap > 1 and text[gap - 2] in ".!?") or _after_markers(text, c0))
        prev_end, prev_raw = c1, raw
        while next_taken < len(taken) and taken[next_taken][1] <= c0:
            next_taken += 1
        if next_taken < len(taken) and taken[next_taken][0] < c1:  # inside a date or backticks
            _close(text, phrase, out)
            continue
        word, start = _strip(raw, c0)
        if not word:
            _close(text, phrase, out)
            continue
        if start != c0:  # an opening quote or bracket starts a new phrase
            _close(text, phrase, out)
        kind = _classify(word)
        if kind is not None:
            _close(text, phrase, out)
            out.append(ExtractedEntity(word, kind, (start, start + len(word)), _key(word, kind)))
            continue
        _phrase_word(text, word, start, sentence_start, phrase, out)
        if start + len(word) != c1 and raw not in _TITLES:  # trailing punctuation ends the phrase
            _close(text, phrase, out)
    _close(text, phrase, out)
    out.sort(key=lambda e: e.span)
    return out[:MAX_MENTIONS]


def _after_markers(text: str, pos: int) -> bool:
    """Whether only Markdown markers stand between the line's start and ``pos`` ("- ", "> ", "1. ",
    "[ ] ", "- [x] "): the word there starts a sentence ("- Ask the team" names no "Ask"). Looks back
    at most :data:`_MARKER_WINDOW` characters, so the cost per word stays constant."""
    low = max(0, pos - _MARKER_WINDOW)
    newline = text.rfind("\n", low, pos)
    if newline == -1 and low > 0:
        return False
    prefix = text[newline + 1:pos]
    return bool(prefix.strip()) and _MARKERS.fullmatch(prefix) is not None


def _strip(raw: str, start: int) -> tuple[str, int]:
    """The chunk without surrounding punctuation, and where it starts in the text."""
    word = raw.lstrip(_LEAD)
    start += len(raw) - len(word)
    word = word.rstrip(_TRAIL)
    return word, start


def _classify(word: str) -> str | None:
    """The kind of a whitespace-free chunk that is one entity by itself, or None (maybe part of a name)."""
    n = len(word)
    if n > MAX_URL:
        return None
    if "://" in word:
        return "url" if _URL.fullmatch(word) else None
    if n > MAX_CHUNK:
        return None
    if "@" in word:
        if word[0] == "@":
            return "handle" if _HANDLE.fullmatch(word) else None
        return "email" if _EMAIL.fullmatch(word) else None
    if "/" in word:
        bare = word.replace("/", "")
        if word.count("/") == 1 and (bare.isdigit() or (len(word) <= 7 and bare.isalpha())):
            return None  # 3/4, and/or, w/o
        return "path" if _PATH.fullmatch(word) else None
    if "_" in word:
        return "identifier" if _SNAKE.fullmatch(word) else None
    if "." in word:
        ext = word.rsplit(".", 1)[1].casefold()
        if ext in _EXTENSIONS and word[0] != "." and _PATH.fullmatch(word):
            return "path"
        if _VERSION.fullmatch(word):
            return "identifier"
        return None
    if "-" in word and _KEBAB.fullmatch(word):
        parts = word.casefold().split("-")
        if any(p in _TECH_PARTS for p in parts) or (any(p.isdigit() for p in parts[1:]) and not word[0].isdigit()):
            return "identifier"
        return None
    if not word.isalpha() and not word.isdigit() and _VERSION.fullmatch(word):
        return "identifier"
    if _CAMEL.fullmatch(word) and not word.isupper():
        return "identifier"
    return None


def _phrase_word(text: str, word: str, start: int, sentence_start: bool, phrase: list[tuple[str, int, int]],
                 out: list[ExtractedEntity]) -> None:
    """Extend, close or start the capitalised phrase with one plain word."""
    m = _WORD.match(word)
    if m is None or (m.end() != len(word) and word[m.end():] not in ("'s", "’s")):
        _close(text, phrase, out)
        return
    w = m.group()
    if w.endswith(("'s", "’s")):
        w = w[:-2]
    if not w or not w[0].isupper() or w.isdigit():
        _close(text, phrase, out)
        return
    folded = w.casefold()
    if folded in _NEVER or folded in _WEEKDAYS or folded in _MONTH_NAMES:
        _close(text, phrase, out)
        return
    if folded.endswith(_CONTRACTIONS):  # "They've", "It'll": never a name
        _close(text, phrase, out)
        return
    if sentence_start and not phrase and (folded in _STOP or folded in _MONTHS
                                          or (len(folded) > 5 and folded.endswith(("ing", "ed")))
                                          or _ADVERB.fullmatch(folded) or _INTERJECTION.fullmatch(folded)):
        _close(text, phrase, out)
        return
    phrase.append((w, start, start + len(w)))
    if m.end() != len(word) or len(phrase) >= MAX_PHRASE:  # a possessive ends the phrase
        _close(text, phrase, out)


def _close(text: str, phrase: list[tuple[str, int, int]], out: list[ExtractedEntity]) -> None:
    if phrase:
        start, end = phrase[0][1], phrase[-1][2]
        name = text[start:end]
        out.append(ExtractedEntity(name, "name", (start, end), normalise_name(name)))
        phrase.clear()


def _dates(text: str, out: list[ExtractedEntity]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for m in _DATE.finditer(text):
        g = m.groups()
        if g[0]:
            y, mo, d = int(g[0]), int(g[1]), int(g[2])
        elif g[3]:
            d, mo, y = int(g[3]), _MONTHS.get(g[4].casefold(), 0), int(g[5])
        elif g[6]:
            mo, d, y = _MONTHS.get(g[6].casefold(), 0), int(g[7]), int(g[8])
        else:
            mo, d, y = _MONTHS.get(g[9].casefold(), 0), 0, int(g[10])
        if not 1 <= mo <= 12 or d > 31 or not 1000 <= y <= 2999:
            continue
        key = f"{y:04d}-{mo:02d}-{d:02d}" if d else f"{y:04d}-{mo:02d}"
        out.append(ExtractedEntity(m.group(), "date", m.span(), key))
        spans.append(m.span())
    return spans


def _backticks(text: str, out: list[ExtractedEntity]) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    if "`" not in text:
        return spans
    for m in _BACKTICK.finditer(text):
        inner = m.group(1).strip()
        if inner:
            start = m.start(1) + m.group(1).index(inner)
            out.append(ExtractedEntity(inner, "identifier", (start, start + len(inner)), normalise_name(inner)))
            spans.append(m.span())
    return spans


def _key(value: str, kind: str) -> str:
    if kind == "url":
        return normalise_name(value.rstrip("/"))
    if kind == "handle":
        return normalise_name(value.rstrip("."))
    return normalise_name(value)
