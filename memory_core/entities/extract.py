"""The deterministic entity extractor the write path always runs (a placeholder: capitalised phrases).

``extract_entities(text)`` returns the entities a memory's text names, each with a ``name`` and a
``kind``; the write path links them like declared ones. This minimal version finds runs of
capitalised words that do not start a sentence; the full extractor replaces it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_WORD = re.compile(r"[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")
MAX_ENTITIES = 16


@dataclass(frozen=True, slots=True)
class Extracted:
    name: str
    kind: str


def extract_entities(text: str) -> list[Extracted]:
    """Capitalised phrases not at the start of a sentence, first occurrence order, at most MAX_ENTITIES."""
    out: dict[str, Extracted] = {}
    for match in _WORD.finditer(text):
        before = text[:match.start()].rstrip()
        if not before or before[-1] in ".!?:\n":
            continue
        out.setdefault(match.group(0).casefold(), Extracted(match.group(0), "name"))
        if len(out) >= MAX_ENTITIES:
            break
    return list(out.values())
