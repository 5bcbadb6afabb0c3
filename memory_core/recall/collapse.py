"""Repeats collapsed: the same fact stored several times is one recall row.

Agents restate facts across sessions; each copy costs the reader tokens and pushes another fact
out of ``limit``. This step runs after ranking, on the ranked rows, and keeps the first ``limit``
*distinct* facts:

- Two rows are the same fact when their normalised content is equal (:func:`fact_key`): NFC,
  case-folded, split on whitespace, with the punctuation at the ends of each word dropped
  (sentence marks, quotes, brackets, markdown emphasis) and word order kept — so ``"Thanks,
  Nate!"`` equals ``"thanks Nate"`` and ``"…/ledger-svc.yaml."`` equals ``"…/ledger-svc.yaml"``,
  while ``3.5`` / ``35``, ``-5`` / ``5`` and ``a.yaml`` / ``a-yaml`` stay different. A question
  mark is kept: ``"the trip was lovely?"`` asks, ``"the trip was lovely"`` tells (recall ranks
  them apart too, :mod:`.answer_type`). Rows whose
  stored ``content_hash`` (whitespace and case folded) is equal are grouped without reading their
  text; the leaders of those groups are then compared by :func:`fact_key`.
- Nothing looser. Word-set similarity was measured on the three workloads
  (``docs/recall-repeats.md``): at Jaccard >= 0.9 it merges *different* facts ("Fixed the
  PermissionError in validate_ledger" / "... in parse_ledger", "Bye Nate!" / "Bye Joanna!"),
  and hiding a distinct fact costs recall more than a repeat costs tokens.
- A group is shown once, at the rank of its best-ranked copy and with that copy's score, as its
  *newest* copy; the response says how many copies there were (``repeats``) and names the
  others (``also``, newest first). Only rows the caller may see are ever ranked, so ``also``
  never names a ref the viewer may not read.
- Episodes (summaries) never collapse (``content_hash`` is empty for them).

Pure: the caller supplies the ranked rows and a way to read the contents of a few of them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

# Dropped from both ends of each word: sentence marks, quotes, brackets, markdown emphasis.
# Kept (they change what a word says): ? - + $ % # @ / \ ~ = & and everything inside a word.
WORD_EDGES = ".,;:!\"'`()[]{}<>*_“”‘’«»…"
LEADERS_MARGIN = 4  # leaders read beyond the distinct ones still needed, so one read usually suffices


@dataclass(frozen=True)
class Copy:
    """A ranked row as this step sees it."""

    id: int
    ts_us: int
    content_hash: str  # "" never collapses (episodes)


@dataclass
class Group:
    """One fact: its copies in rank order; ``members[0]`` is the best-ranked."""

    members: list[Copy] = field(default_factory=list)

    @property
    def lead(self) -> Copy:
        """The best-ranked copy: its rank and score are the group's."""
        return self.members[0]

    @property
    def shown(self) -> Copy:
        """The copy the caller sees: the newest."""
        return max(self.members, key=lambda c: (c.ts_us, c.id))

    @property
    def also(self) -> list[int]:
        """The other copies' ids, newest first."""
        shown = self.shown.id
        return [c.id for c in sorted(self.members, key=lambda c: (-c.ts_us, -c.id)) if c.id != shown]


def fact_key(text: str) -> str:
    """The normalised content two copies of one fact share (see the module docstring)."""
    words = (word.strip(WORD_EDGES) for word in unicodedata.normalize("NFC", text).casefold().split())
    return " ".join(word for word in words if word)


def collapse(ranked: Sequence[Copy], limit: int, contents: Callable[[list[int]], Mapping[int, str]]) -> list[Group]:
    """The first ``limit`` distinct facts of ``ranked`` (best first), each with every copy ranked.

    ``contents`` reads the text of the ids it is given (only group leaders are read, a few at a time).
    """
    by_hash: dict[str, Group] = {}
    groups: list[Group] = []
    for copy in ranked:
        group = by_hash.get(copy.content_hash) if copy.content_hash else None
        if group is None:
            group = Group()
            groups.append(group)
            if copy.content_hash:
                by_hash[copy.content_hash] = group
        group.members.append(copy)
    distinct: list[Group] = []
    by_key: dict[str, Group] = {}
    start = 0
    while start < len(groups) and len(distinct) < limit:
        chunk = groups[start:start + limit - len(distinct) + LEADERS_MARGIN]
        start += len(chunk)
        texts = contents([g.lead.id for g in chunk if g.lead.content_hash])
        for group in chunk:
            text = texts.get(group.lead.id) if group.lead.content_hash else None
            key = fact_key(text) if text is not None else ""
            same = by_key.get(key) if key else None
            if same is not None:
                same.members.extend(group.members)  # ranked after ``same``'s lead, so the lead stays
                continue
            if key:
                by_key[key] = group
            distinct.append(group)
    return distinct[:limit]
