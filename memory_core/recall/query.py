"""Reading a recall query: who it names, which dates it names, what to embed, what to match.

Pure string work (well under a millisecond), done once per recall:

- **named agents**: the tenant's agents (AGENT nodes of the graph) that the query names as
  whole words, found through the tenant's name index in O(query) whatever the number of
  agents; they become the speaker signal and are removed from the embedded and matched
  text (a name in the embedded text pulls every row that mentions it);
- **date windows** (:mod:`.dates`): absolute English dates, and relative ones ("yesterday",
  "two months ago", "in March") resolved against an anchor (the caller's ``now``, else the
  tenant's newest memory);
- **semantic text**: the query without full dates, its named agents said as pronouns ("What
  did Nate give Joanna?" → "What did I give you?": the memories are the agents' own first-person
  turns) or, with that off, left out (the raw query if that leaves nothing);
- **lexical terms**: the same text as lower-cased words minus stopwords, for BM25.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from graph.api import AgentNameIndex
from memory_core import validation as v
from memory_core.errors import InvalidInputError
from memory_core.recall.dates import DateWindow, date_score, parse_dates, strip_dates

# ---- words ----------------------------------------------------------------------------------
TOKEN = re.compile(r"[\w']+", re.UNICODE)
WORD = re.compile(r"\w+", re.UNICODE)
STEM = 5  # query words and row words compare on their first letters (a cheap stemmer)
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


def stems(text: str) -> set[str]:
    """The stems of a row's words, as the query's terms are compared with them (``term[:STEM]``)."""
    return {w[:STEM] for w in WORD.findall(text.lower())}


# ---- the reading ----------------------------------------------------------------------------
@dataclass(frozen=True)
class QueryReading:
    text: str  # the query as given
    semantic: str  # what is embedded
    terms: list[str]  # what BM25 matches (OR of quoted words)
    named: frozenset[str] = field(default_factory=frozenset)  # agents the query names
    dates: list[DateWindow] = field(default_factory=list)
    # named agents written as a name (capitalised, digits, punctuation); the others read as ordinary words
    as_name: frozenset[str] = field(default_factory=frozenset)
    # recall_with_context: the conversation's last entry, the turn the query follows (read by the
    # second stage before the query, as a turn is read after the one before it)
    lead: str = ""


_POSSESSIVE = re.compile(r"['’]s\b", re.I)  # straight or typographic apostrophe


def named_agents(query: str, agents: AgentNameIndex | Iterable[str]
                 ) -> tuple[frozenset[str], frozenset[str], list[tuple[int, int]]]:
    """The tenant's agents that the query names as whole words (case-insensitive); those of
    them written as a name at least once (a capital, a digit or punctuation: "Caroline",
    "bot-7.x", not "the user"); and the spans written as a name, which the embedded and matched
    text leave out (a name said as an ordinary word — "the ghost" — stays a word to match).
    Names that are stopwords or single letters cannot be told from ordinary words."""
    written_as_name: set[str] = set()
    if not isinstance(agents, AgentNameIndex):
        index = AgentNameIndex()
        for agent in agents:
            index.add(agent)
        agents = index
    found: set[str] = set()
    spans: list[tuple[int, int]] = []
    for m in agents.find(query):
        said = query[m.start:m.end]
        key = said.casefold()
        if len(key) < 2 or key in STOPWORDS:
            continue
        found.add(m.name)
        if said.isalpha() and said.islower():
            continue
        written_as_name.add(m.name)
        end = m.end
        if (tail := _POSSESSIVE.match(query, end)) is not None:
            end = tail.end()
        spans.append((m.start, end))
    return frozenset(found), frozenset(written_as_name), spans


def as_spoken(query: str, spans: list[tuple[int, int]]) -> str:
    """``query`` with its named agents (``spans``, from :func:`named_agents`) said the way their own
    memories say them: the first agent named as "I" ("my" for "Caroline's"), every other one as
    "you" ("your"). A dialogue turn is written in the first and second person ("I got this pup for
    you"), a question about it in the third ("What did Nate give Joanna?")."""
    out: list[str] = []
    first: str | None = None
    last = 0
    for start, end in sorted(spans):
        said = query[start:end]
        possessive = _POSSESSIVE.search(said) is not None
        key = _POSSESSIVE.sub("", said).casefold()
        first = key if first is None else first
        if key == first:
            out += [query[last:start], "my" if possessive else "I"]
        else:
            out += [query[last:start], "your" if possessive else "you"]
        last = end
    out.append(query[last:])
    return "".join(out)


def read_query(query: str, agents: AgentNameIndex | Iterable[str], anchor: datetime | None = None,
               pronouns: bool = False) -> QueryReading:
    """Read ``query``: named agents, dates (relative ones against ``anchor``), embedded and matched text.
    With ``pronouns`` the embedded text says the named agents as pronouns (:func:`as_spoken`) rather
    than leaving them out; the matched words leave them out either way."""
    named, as_name, spans = named_agents(query, agents)
    chars = list(query)
    for start, end in spans:
        chars[start:end] = [" "] * (end - start)
    stripped = strip_dates("".join(chars))
    embedded = strip_dates(as_spoken(query, spans)) if pronouns and spans else stripped
    semantic = " ".join(embedded.split()) or query
    return QueryReading(query, semantic, words(stripped), named, parse_dates(query, anchor), as_name)


def read_anchor(now: object) -> datetime | None:
    """The caller's ``now`` (what relative dates in the query count back from), validated."""
    if now is None:
        return None
    try:
        return v.timestamp(now)
    except InvalidInputError as exc:
        raise InvalidInputError("'now' must be a timezone-aware datetime or ISO-8601 string.", field="now") from exc


__all__ = ["STEM", "WORD", "DateWindow", "QueryReading", "as_spoken", "date_score", "named_agents", "parse_dates",
           "read_anchor", "read_query", "stems", "words"]
