"""Small, dependency-free text helpers shared by the model provider and the extractive fallback.

Both paths must honour the same hard cap (a miniSummary is at most ``max_chars`` characters), so
the trimming rule lives in one place.
"""

from __future__ import annotations

import re

ELLIPSIS = "…"

_WS = re.compile(r"\s+")
# A sentence ends at . ! ? (optionally followed by closing quotes/brackets) before whitespace,
# or at a line break; this is deliberately simple and deterministic, not linguistically perfect.
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+|\s*\n+\s*")


def normalize_space(text: str) -> str:
    """Collapse every run of whitespace (newlines included) into one space and strip the ends."""
    return _WS.sub(" ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into whitespace-normalized, non-empty sentences, in order."""
    return [s for s in (normalize_space(part) for part in _SENTENCE_END.split(text)) if s]


def trim_to_chars(text: str, max_chars: int) -> str:
    """Return ``text`` (whitespace-normalized) cut to at most ``max_chars`` characters.

    The cut falls on a word boundary and ends with an ellipsis so a reader can tell the summary was
    shortened. A single word longer than the budget is hard-cut: the cap is a contract, the word
    boundary only a nicety.
    """
    if max_chars <= 0:
        return ""
    flat = normalize_space(text)
    if len(flat) <= max_chars:
        return flat
    budget = max_chars - len(ELLIPSIS)
    if budget <= 0:
        return flat[:max_chars]
    head = flat[: budget + 1]  # one extra char tells us whether the cut lands on a space
    cut = head.rfind(" ")
    head = head[:cut] if cut > 0 else flat[:budget]
    # Dangling separators read badly before an ellipsis ("foo, …").
    head = head.rstrip(" ,;:.-–—")
    return (head or flat[:budget]) + ELLIPSIS
