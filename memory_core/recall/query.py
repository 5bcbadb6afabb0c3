"""Reading a recall query: who it names, which dates it names, what to embed, what to match.

Pure string work (well under a millisecond), done once per recall:

- **named agents**: the tenant's agents (AGENT nodes of the graph) that the query names as a
  whole word; they become the speaker signal and are removed from the embedded and matched
  text (a name in the embedded text pulls every row that mentions it);
- **date windows**: absolute English dates ("8 May 2023", "May 8th, 2023", "May 2023",
  "2023-05-08", "2023", a capitalised month alone); relative ones ("last week") have no
  anchor the store could trust and are left to the text retrievers;
- **semantic text**: the query without full dates and named agents (the raw query if that
  leaves nothing);
- **lexical terms**: the same text as lower-cased words minus stopwords, for BM25.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# ---- temporal expressions -------------------------------------------------------------------
MONTHS = {m.lower(): i for i, m in enumerate(calendar.month_name) if m}
MONTHS.update({m.lower(): i for i, m in enumerate(calendar.month_abbr) if m})
MONTHS["sept"] = 9
_MON = (r"(january|february|march|april|may|june|july|august|september|october|november|december"
        r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)")
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"((?:1[6-9]|20|21)\d\d)"
_FULL_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
DAY_WINDOW, MONTH_WINDOW, YEAR_WINDOW, ANY_YEAR_MONTH = "day", "month", "year", "month-any-year"
# most precise first; a matched span is masked so "8 May 2023" is not read again as "May 2023"
PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(rf"\b{_YEAR}-(\d{{1,2}})-(\d{{1,2}})\b")),
    ("dmy", re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MON}\.?,?\s*{_YEAR}\b", re.I)),
    ("mdy", re.compile(rf"\b{_MON}\.?\s+{_DAY},?\s*{_YEAR}\b", re.I)),
    ("my", re.compile(rf"\b{_MON}\.?,?\s+(?:of\s+)?{_YEAR}\b", re.I)),
    ("y", re.compile(rf"\b{_YEAR}\b")),
    ("m", re.compile(rf"\b{_FULL_MONTH}\b(?!\s+(?:I|we|you|he|she|they|it)\b)")),  # not "May I …"
]
FULL_DATES = 4  # the patterns whose text is removed from the query (iso, dmy, mdy, my)


@dataclass(frozen=True)
class DateWindow:
    start: datetime
    end: datetime  # exclusive
    kind: str  # DAY_WINDOW | MONTH_WINDOW | YEAR_WINDOW | ANY_YEAR_MONTH (start.month only)


def _month(name: str) -> int:
    name = name.lower()
    return MONTHS.get(name, MONTHS.get(name[:3], 0))


def _window(kind: str, m: re.Match[str]) -> DateWindow:
    g = m.groups()
    if kind in ("iso", "dmy", "mdy"):
        y, mo, d = {"iso": (g[0], g[1], g[2]), "dmy": (g[2], g[1], g[0]), "mdy": (g[2], g[0], g[1])}[kind]
        start = datetime(int(y), int(mo) if mo.isdigit() else _month(mo), int(d), tzinfo=UTC)
        return DateWindow(start, start + timedelta(days=1), DAY_WINDOW)
    if kind == "my":
        mo, y = _month(g[0]), int(g[1])
        return DateWindow(datetime(y, mo, 1, tzinfo=UTC), datetime(y + (mo == 12), mo % 12 + 1, 1, tzinfo=UTC),
                          MONTH_WINDOW)
    if kind == "y":
        y = int(g[0])
        return DateWindow(datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC), YEAR_WINDOW)
    start = datetime(2000, _month(g[0]), 1, tzinfo=UTC)
    return DateWindow(start, start, ANY_YEAR_MONTH)


def parse_dates(text: str) -> list[DateWindow]:
    """Absolute dates named in ``text``, most precise first (invalid dates are skipped)."""
    out: list[DateWindow] = []
    taken: list[tuple[int, int]] = []
    for kind, rx in PATTERNS:
        for m in rx.finditer(text):
            if any(a < m.end() and m.start() < b for a, b in taken):
                continue
            try:
                window = _window(kind, m)
            except ValueError:
                continue
            taken.append((m.start(), m.end()))
            out.append(window)
    return out


def strip_dates(text: str) -> str:
    for _kind, rx in PATTERNS[:FULL_DATES]:
        text = rx.sub(" ", text)
    return text


def date_score(ts: datetime, windows: Iterable[DateWindow], grace_days: float, tau_days: float) -> float:
    """1 inside a window (or up to ``grace_days`` after it: events are told a few days after
    they happen), halving every ``tau_days`` outside; year windows count half and take no
    grace; a month of any year matches the row's month (or the month ``grace_days`` earlier)."""
    best = 0.0
    for w in windows:
        if w.kind == ANY_YEAR_MONTH:
            told = ts - timedelta(days=grace_days)
            best = max(best, 1.0 if w.start.month in (ts.month, told.month) else 0.0)
            continue
        grace = timedelta(days=0 if w.kind == YEAR_WINDOW else grace_days)
        if w.start <= ts < w.end + grace:
            s = 1.0
        else:
            gap = (w.start - ts) if ts < w.start else (ts - w.end - grace)
            s = 2.0 ** (-gap.total_seconds() / 86_400 / tau_days)
        best = max(best, s * (0.5 if w.kind == YEAR_WINDOW else 1.0))
    return best


# ---- words ----------------------------------------------------------------------------------
TOKEN = re.compile(r"[\w']+", re.UNICODE)
_STOPWORDS_TEXT = """
a an the of to in on at for with and or but is are was were be been being do does did done have has had
having i you he she it we they me him her them my your his its our their this that these those what
which who whom whose when where why how there here as by from about into over after before than then so
if not no yes can could would should will shall may might must just also very any some all each both
more most other such only own same too s t don't what's kind ever up out get got go going like think
"""
STOPWORDS = frozenset(_STOPWORDS_TEXT.split())


def words(text: str) -> list[str]:
    """Lower-cased words, possessive 's cut, stopwords dropped, in order, without repeats."""
    out: dict[str, None] = {}
    for tok in TOKEN.findall(text.lower()):
        tok = tok.strip("'")
        if tok.endswith("'s"):
            tok = tok[:-2]
        tok = tok.strip("'")
        if tok and tok not in STOPWORDS and (len(tok) > 1 or tok.isdigit()):
            out.setdefault(tok, None)
    return list(out)


# ---- the reading ----------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryReading:
    text: str  # the query as given
    semantic: str  # what is embedded
    terms: list[str]  # what BM25 matches (OR of quoted words)
    named: frozenset[str] = field(default_factory=frozenset)  # agents the query names
    dates: list[DateWindow] = field(default_factory=list)


def _name_pattern(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?:'s)?(?!\w)", re.I)


def named_agents(query: str, agents: Iterable[str]) -> frozenset[str]:
    """The tenant's agents that the query names as whole words (case-insensitive).

    Names that are stopwords or single letters cannot be told from ordinary words.
    """
    plain = {w.casefold() for w in TOKEN.findall(query)}
    found = set()
    for agent in agents:
        key = agent.casefold()
        if len(key) < 2 or key in STOPWORDS:
            continue
        if re.fullmatch(r"\w+", key):
            if key in plain or f"{key}'s" in plain:
                found.add(agent)
        elif _name_pattern(agent).search(query):
            found.add(agent)
    return frozenset(found)


def read_query(query: str, agents: Iterable[str]) -> QueryReading:
    named = named_agents(query, agents)
    stripped = strip_dates(query)
    for agent in sorted(named, key=len, reverse=True):
        stripped = _name_pattern(agent).sub(" ", stripped)
    semantic = " ".join(stripped.split()) or query
    return QueryReading(query, semantic, words(stripped), named, parse_dates(query))


__all__ = ["DateWindow", "QueryReading", "date_score", "named_agents", "parse_dates", "read_query", "words"]
