"""Which of a tenant's agent names a text mentions, at a cost that grows with the text.

A tenant may hold any number of agents (any caller creates one by writing). Matching a
query against each name costs O(agents) per recall; this index is keyed by a name's
*core* — its case-folded text between its first and last word character — and a text is
read once: every run of 1..L consecutive word tokens (L = the longest name's token count
present) is looked up in a dict. Work per call is O(tokens × distinct name lengths), never
O(agents); ``probes`` counts the lookups so tests can hold it bounded.

Leading or trailing punctuation of a name is not part of its core: ``@bob`` is mentioned by
"bob" as well as "@bob". A name without a word character cannot be told from punctuation
and is never matched.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WORD = re.compile(r"\w+", re.UNICODE)
MAX_TOKENS = 64  # names are at most 128 characters


@dataclass(frozen=True)
class Mention:
    name: str
    start: int  # span in the text as given
    end: int


def name_core(name: str) -> tuple[str, int] | None:
    """(case-folded core, token count), or None for a name without a word character."""
    folded = name.casefold()
    tokens = list(WORD.finditer(folded))
    if not tokens:
        return None
    return folded[tokens[0].start():tokens[-1].end()], min(len(tokens), MAX_TOKENS)


class AgentNameIndex:
    """Agent names of one tenant, found in a text in O(text)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._by_core: dict[str, set[str]] = {}
        self._lengths: dict[int, int] = {}  # token count -> how many cores have it
        self.probes = 0  # dict lookups made by find(), cumulative

    def add(self, name: str) -> None:
        if name in self.names:
            return
        self.names.add(name)
        core = name_core(name)
        if core is None:
            return
        text, n = core
        if text not in self._by_core:
            self._lengths[n] = self._lengths.get(n, 0) + 1
        self._by_core.setdefault(text, set()).add(name)

    def find(self, text: str) -> list[Mention]:
        """Every name whose core occurs in ``text`` as whole words, with its span."""
        if not self._by_core:
            return []
        # per-character casefold keeps spans aligned with the text as given
        folded_chars = [c.casefold() for c in text]
        tokens = list(WORD.finditer(text))
        lengths = sorted(self._lengths)
        out: list[Mention] = []
        for i, first in enumerate(tokens):
            for n in lengths:
                j = i + n - 1
                if j >= len(tokens):
                    break
                start, end = first.start(), tokens[j].end()
                self.probes += 1
                hit = self._by_core.get("".join(folded_chars[start:end]))
                if hit:
                    out.extend(Mention(name, start, end) for name in hit)
        return out
