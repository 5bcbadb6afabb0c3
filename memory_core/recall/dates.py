"""Dates named in a recall query, as time windows a row's timestamp is scored against.

- **absolute** English dates: "8 May 2023", "May 8th, 2023", "May 2023", "2023-05-08",
  "2023", a capitalised month alone (any year);
- **relative** ones, read only when an anchor is known (the caller's ``now``, else the
  tenant's newest memory): "today", "yesterday", "the day before yesterday", "this/last
  week|month|year", "N days/weeks/months/years ago" (digits or words, "a", "a few", "a
  couple of"), "last Monday", and "in March" (the latest March at or before the anchor).

Relative windows are marked ``relative``: the anchor is a guess about when the question
is asked, so scoring lets them reorder relevant rows rather than lift unrelated ones.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from memory_core.models import from_us
from memory_core.recall.fusion import best

if TYPE_CHECKING:
    from memory_core.recall.pool import Pool

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

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
            "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a couple of": 2, "a few": 3,
            "couple of": 2, "few": 3}
_NUM = r"(\d{1,3}|a couple of|couple of|a few|few|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
_UNIT = r"(day|week|month|year)s?"
_WEEKDAY = r"(monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
RELATIVE: list[tuple[str, re.Pattern[str]]] = [
    ("ago", re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b", re.I)),
    ("daybefore", re.compile(r"\bthe\s+day\s+before\s+yesterday\b", re.I)),
    ("yesterday", re.compile(r"\byesterday\b", re.I)),
    ("today", re.compile(r"\b(?:today|tonight|this\s+morning|this\s+afternoon|this\s+evening)\b", re.I)),
    ("last", re.compile(r"\b(?:last|past|previous)\s+(week|month|year)\b", re.I)),
    ("this", re.compile(r"\bthis\s+(week|month|year)\b", re.I)),
    ("weekday", re.compile(rf"\b(?:last|on|this\s+past)\s+{_WEEKDAY}\b", re.I)),
    ("inmonth", re.compile(rf"\b(?:in|during|since|last)\s+{_FULL_MONTH}\b")),
]


@dataclass(frozen=True)
class DateWindow:
    start: datetime
    end: datetime  # exclusive
    kind: str  # DAY_WINDOW | MONTH_WINDOW | YEAR_WINDOW | ANY_YEAR_MONTH (start.month only)
    relative: bool = False  # resolved against an anchor rather than read as written


def _month(name: str) -> int:
    name = name.lower()
    return MONTHS.get(name, MONTHS.get(name[:3], 0))


def _month_window(y: int, mo: int, relative: bool = False) -> DateWindow:
    while mo < 1:
        y, mo = y - 1, mo + 12
    return DateWindow(datetime(y, mo, 1, tzinfo=UTC), datetime(y + (mo == 12), mo % 12 + 1, 1, tzinfo=UTC),
                      MONTH_WINDOW, relative)


def _window(kind: str, m: re.Match[str]) -> DateWindow:
    g = m.groups()
    if kind in ("iso", "dmy", "mdy"):
        y, mo, d = {"iso": (g[0], g[1], g[2]), "dmy": (g[2], g[1], g[0]), "mdy": (g[2], g[0], g[1])}[kind]
        start = datetime(int(y), int(mo) if mo.isdigit() else _month(mo), int(d), tzinfo=UTC)
        return DateWindow(start, start + timedelta(days=1), DAY_WINDOW)
    if kind == "my":
        return _month_window(int(g[1]), _month(g[0]))
    if kind == "y":
        y = int(g[0])
        return DateWindow(datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC), YEAR_WINDOW)
    start = datetime(2000, _month(g[0]), 1, tzinfo=UTC)
    return DateWindow(start, start, ANY_YEAR_MONTH)


def _days(day: datetime, n: int) -> DateWindow:
    start = day.replace(hour=0, minute=0, second=0, microsecond=0)
    return DateWindow(start, start + timedelta(days=n), DAY_WINDOW, True)


def _unit_window(anchor: datetime, unit: str, back: int) -> DateWindow:
    """The calendar day/week/month/year ``back`` units before the anchor's."""
    if unit == "day":
        return _days(anchor - timedelta(days=back), 1)
    if unit == "week":
        monday = anchor - timedelta(days=anchor.weekday() + 7 * back)
        return _days(monday, 7)
    if unit == "month":
        return _month_window(anchor.year, anchor.month - back, True)
    y = anchor.year - back
    return DateWindow(datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC), YEAR_WINDOW, True)


def _relative(kind: str, m: re.Match[str], anchor: datetime) -> DateWindow:
    g = [x.lower() if x else x for x in m.groups()]
    if kind == "ago":
        n = int(g[0]) if g[0].isdigit() else _NUMBERS[" ".join(g[0].split())]
        return _unit_window(anchor, g[1], n)
    if kind in ("daybefore", "yesterday", "today"):
        return _unit_window(anchor, "day", {"daybefore": 2, "yesterday": 1, "today": 0}[kind])
    if kind in ("last", "this"):
        return _unit_window(anchor, g[0], 1 if kind == "last" else 0)
    if kind == "weekday":
        target = list(calendar.day_name).index(m.group(1).capitalize())
        back = (anchor.weekday() - target) % 7 or 7
        return _unit_window(anchor, "day", back)
    mo = _month(g[0])  # inmonth: the latest such month at or before the anchor
    return _month_window(anchor.year if mo <= anchor.month else anchor.year - 1, mo, True)


def parse_dates(text: str, anchor: datetime | None = None) -> list[DateWindow]:
    """Dates named in ``text``, most precise first (invalid dates are skipped); relative
    expressions only when ``anchor`` is given."""
    out: list[DateWindow] = []
    taken: list[tuple[int, int]] = []
    if anchor is not None:
        for kind, rx in RELATIVE:
            for m in rx.finditer(text):
                if any(a < m.end() and m.start() < b for a, b in taken):
                    continue
                try:
                    window = _relative(kind, m, anchor)
                except (ValueError, OverflowError, KeyError):
                    continue
                taken.append((m.start(), m.end()))
                out.append(window)
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
        # a relative window is the anchor's guess: told-later grace would reach the anchor itself
        grace = timedelta(days=0 if w.kind == YEAR_WINDOW or w.relative else grace_days)
        # a relative window is as sharp as it is long ("yesterday" is not "about two weeks ago")
        tau = max(1.0, (w.end - w.start).days) if w.relative else tau_days
        if w.start <= ts < w.end + grace:
            s = 1.0
        else:
            gap = (w.start - ts) if ts < w.start else (ts - w.end - grace)
            s = 2.0 ** (-gap.total_seconds() / 86_400 / tau)
        best = max(best, s * (0.5 if w.kind == YEAR_WINDOW else 1.0))
    return best


__all__ = ["ANY_YEAR_MONTH", "DAY_WINDOW", "MONTH_WINDOW", "YEAR_WINDOW", "DateWindow", "date_score",
           "parse_dates", "strip_dates"]


def lift(pool: Pool) -> None:
    """Stage: dates the query names against each row's own timestamp. An absolute date adds ``dates.weight`` ×
    its score; a relative one counts from a guessed "now", so it adds ``dates.relative`` × its score × the
    row's share of the best base: it reorders relevant rows, never lifts unrelated ones."""
    reading, cfg, cands = pool.reading, pool.cfg.dates, pool.cands
    if not reading.dates or not cfg.weight:
        return
    absolute = [w for w in reading.dates if not w.relative]
    relative = [w for w in reading.dates if w.relative]
    top = best([c.base for c in cands.values()])
    for k, c in cands.items():
        ts = from_us(pool.attrs[k].ts_us)
        t_abs = date_score(ts, absolute, cfg.grace_days, cfg.tau_days) if absolute else 0.0
        t_rel = date_score(ts, relative, cfg.grace_days, cfg.tau_days) if relative else 0.0
        bonus = cfg.weight * t_abs + cfg.relative * t_rel * max(0.0, c.base) / top
        c.time = max(t_abs, t_rel)
        c.rel += bonus
        c.graph += bonus
