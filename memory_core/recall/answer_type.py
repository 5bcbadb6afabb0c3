"""Answer-type priors: what kind of answer a question asks for, and whether a row holds one.

A question asking *when* is answered by a memory that says when ("last Friday", "two weeks
ago", "in May"), one asking *how many* by one holding a number, *how long* by a duration,
*where* by a place name. The kinds are read from the question's words with generic English
patterns; a row's kinds from its text. Scoring lets a row holding the asked kind gain a share
of its own relevance: it reorders rows that match the query, never lifts unrelated ones.
A row that ends by asking a question hands the floor over rather than tells ("What inspired
you?"): whatever the question, it loses ``answer.asking_penalty`` of its relevance. Only the best
``answer.rows`` rows are read (one read of their texts).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_core.recall.pool import Candidate, Pool

_NUMBER_WORDS = (r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty"
                 r"|hundred|thousand|a couple|a few|several|dozen|first|second|third|both")
_UNIT = r"(?:second|minute|hour|day|night|week|weekend|month|year|decade)s?"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?"
_MONTH = (r"(?:january|february|march|april|may|june|july|august|september|october|november|december"
          r"|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec)")
_NUM = rf"(?:\d+|{_NUMBER_WORDS}|a|an)"

TIME = re.compile(
    rf"\b(?:yesterday|today|tonight|tomorrow|recently|lately|ago|the other day|this (?:morning|afternoon|evening)"
    rf"|(?:last|next|this|past|previous|coming|every) (?:{_UNIT}|{_WEEKDAY}|summer|winter|spring|fall|autumn|time)"
    rf"|{_WEEKDAY}|{_MONTH}\.? \d{{1,2}}|\d{{1,2}}(?:st|nd|rd|th)?(?: of)? {_MONTH}|(?:in|since|during|until) {_MONTH}"
    rf"|(?:19|20)\d\d|\d{{1,2}}(?::\d\d)? ?(?:am|pm)|the \d{{1,2}}(?:st|nd|rd|th))\b")
DURATION = re.compile(
    rf"\b(?:for|over|about|almost|nearly|around|since) (?:the (?:last|past) )?{_NUM}?\s*{_UNIT}|\b{_NUM}\s+{_UNIT}"
    rf"|\bsince\b|\b(?:all|my whole) (?:my )?life\b")
NUMBER = re.compile(rf"\b(?:\d+(?:[.,]\d+)?|{_NUMBER_WORDS})\b")
# a capitalised word after a place preposition, not at a sentence start: "in Paris", "to the UK"
PLACE = re.compile(rf"\b(?:in|at|to|from|near|visit(?:ed|ing)?) (?:the )?(?!(?i:{_WEEKDAY}|{_MONTH})\b)[A-Z][\w'-]+")

KINDS: dict[str, re.Pattern[str]] = {"time": TIME, "duration": DURATION, "number": NUMBER, "place": PLACE}
CASED = frozenset({"place"})  # the other patterns read lower-cased text (3x faster than re.I)

# what the question asks for, from its words (checked in order: "how long ago" asks when); "when" and
# "where" ask only as a question's verb phrase ("when did", "where is"), not in a clause ("when he goes")
_AUX = r"(?:do|does|did|is|are|was|were|will|would|has|have|had|can|could|should|might|may|am)\b"
_ASKS: list[tuple[str, re.Pattern[str]]] = [
    ("time", re.compile(rf"\bwhen {_AUX}|\b(?:what|which) (?:time|year|month|day|date)\b|\bhow long ago\b", re.I)),
    ("duration", re.compile(r"\b(?:how long|since when|for how many)\b", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|often|old|far)\b", re.I)),
    ("place", re.compile(rf"\bwhere {_AUX}|\b(?:what|which) (?:city|country|place|town|state)\b", re.I)),
]


def asked_kind(question: str) -> str | None:
    """The kind of answer ``question`` asks for, or None."""
    for kind, rx in _ASKS:
        if rx.search(question):
            return kind
    return None


def holds(kind: str, text: str) -> bool:
    """Whether ``text`` holds an answer of ``kind``."""
    return KINDS[kind].search(text if kind in CASED else text.lower()) is not None


def lift(rows: Iterable[Candidate], texts: dict[int, str], kind: str, weight: float) -> None:
    """Each of ``rows`` whose text holds an answer of ``kind`` gains ``weight`` × its relevance's share
    of the best of them (a row that matches the query little gains little)."""
    rows = list(rows)
    top = max((c.rel for c in rows), default=0.0)
    if top <= 0:
        return
    for c in rows:
        if c.id in texts and holds(kind, texts[c.id]):
            bonus = weight * max(0.0, c.rel) / top
            c.rel += bonus
            c.graph += bonus


def asks(text: str) -> bool:
    """Whether ``text`` ends by asking a question (it hands the floor over rather than telling)."""
    return text.rstrip().endswith("?")


def asking(rows: Iterable[Candidate], texts: dict[int, str], penalty: float) -> None:
    """Each of ``rows`` whose text ends by asking loses ``penalty`` of its relevance."""
    if penalty <= 0:
        return
    for c in rows:
        if c.id in texts and asks(texts[c.id]):
            c.rel *= 1.0 - penalty


def prefer(pool: Pool) -> None:
    """Stage: among the best ``answer.rows`` rows, those holding the kind of answer the question asks for
    gain (:func:`lift`), and those that end by asking lose (:func:`asking`)."""
    cfg = pool.cfg.answer
    kind = asked_kind(pool.reading.text) if cfg.weight else None
    if kind is None and not cfg.asking_penalty:
        return
    leaders = sorted(pool.cands.values(), key=lambda c: -c.rel)[:cfg.rows]
    texts = pool.text([c.id for c in leaders])
    if kind is not None:
        lift(leaders, texts, kind, cfg.weight)
    asking(leaders, texts, cfg.asking_penalty)


__all__ = ["KINDS", "asked_kind", "asking", "asks", "holds", "lift", "prefer"]
