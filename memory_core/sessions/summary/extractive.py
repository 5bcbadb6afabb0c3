"""Deterministic extractive miniSummary: the fallback when no model answers.

It must be cheap, stable (the same input always yields the same text, so cached episodes do not
churn) and useful to an agent that just lost its context. So it keeps:

1. the first sentence of the latest handoff (a handoff is already a human/agent-written summary);
2. then the most salient sentences of the latest turns, scored by signal words (decisions, next
   steps, failures) and recency, emitted in chronological order so the text reads naturally.

No model, no randomness, no clock: only the turns and the handoff.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.sessions.summary.provider import SummaryTurn
from memory_core.sessions.summary.text import normalize_space, split_sentences, trim_to_chars

# How many of the newest turns are mined for sentences; older turns are what the handoff is for.
RECENT_TURNS = 8
# Sentences shorter than this are usually acknowledgements ("ok", "thanks!") and carry no state.
MIN_SENTENCE_CHARS = 12

# Words that mark state an agent needs to resume: decisions, plans, outcomes, problems.
_SIGNAL = re.compile(
    r"\b(decid\w*|agreed|chose|plan\w*|next|todo|must|need\w*|will|should|goal|fix\w*|bug|error\w*|"
    r"fail\w*|broke\w*|block\w*|done|finished|implement\w*|merged|added|removed|because|instead)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class _Candidate:
    """A sentence with its position, so selection can be by score and output by time."""

    text: str
    turn_index: int  # index into the (chronological) turn list
    sentence_index: int
    score: float


def _score(sentence: str, turn_index: int, newest_index: int, sentence_index: int) -> float:
    """Signal words dominate; recency breaks ties; a turn's opening sentence gets a small bonus."""
    signals = min(3, len(_SIGNAL.findall(sentence)))
    recency = 1.0 / (1 + newest_index - turn_index)  # 1.0 for the newest turn, then 0.5, 0.33...
    opening = 0.25 if sentence_index == 0 else 0.0
    length_ok = 0.25 if 20 <= len(sentence) <= 200 else 0.0
    return 2.0 * signals + recency + opening + length_ok


def _candidates(turns: Sequence[SummaryTurn]) -> list[_Candidate]:
    newest = len(turns) - 1
    out: list[_Candidate] = []
    seen: set[str] = set()
    # Newest first, so that a sentence repeated across turns is kept at its latest occurrence.
    for turn_index in range(newest, max(-1, newest - RECENT_TURNS), -1):
        for sentence_index, sentence in enumerate(split_sentences(turns[turn_index].content)):
            key = sentence.casefold()
            if len(sentence) < MIN_SENTENCE_CHARS or key in seen:
                continue
            seen.add(key)
            score = _score(sentence, turn_index, newest, sentence_index)
            out.append(_Candidate(sentence, turn_index, sentence_index, score))
    return out


def _chronological(turns: Sequence[SummaryTurn]) -> list[SummaryTurn]:
    """Oldest first. Sorted by timestamp when every turn has one (stable, so ties keep input order)."""
    if turns and all(t.timestamp is not None for t in turns):
        return sorted(turns, key=lambda t: t.timestamp)  # type: ignore[arg-type, return-value]
    return list(turns)


def extractive_summary(
    turns: Sequence[SummaryTurn], previous_handoff: str | None, max_chars: int = 280
) -> str:
    """Build a summary of at most ``max_chars`` from the handoff and the latest turns.

    Never empty when there is at least one turn with content or a non-blank handoff; returns ""
    only when there is nothing at all to summarize.
    """
    ordered = _chronological(turns)
    parts: list[str] = []
    used = 0

    handoff_sentences = split_sentences(previous_handoff or "")
    if handoff_sentences:
        # The handoff may take at most half the budget: the latest turns are newer than it.
        first = trim_to_chars(handoff_sentences[0], max(1, max_chars // 2))
        parts.append(first)
        used = len(first)

    # Greedy by score (ties: newer turn, earlier sentence), skipping what does not fit, so one long
    # sentence cannot starve the rest.
    ranked = sorted(_candidates(ordered), key=lambda c: (-c.score, -c.turn_index, c.sentence_index))
    chosen: list[_Candidate] = []
    for cand in ranked:
        cost = len(cand.text) + (1 if parts or chosen else 0)
        if used + cost <= max_chars:
            chosen.append(cand)
            used += cost
    chosen.sort(key=lambda c: (c.turn_index, c.sentence_index))
    parts.extend(c.text for c in chosen)

    if not chosen and ordered:
        # Nothing fitted whole (or every sentence was too short): cut the newest turn to the space left.
        latest = next((normalize_space(t.content) for t in reversed(ordered) if t.content.strip()), "")
        room = max_chars - used - (1 if parts else 0)
        if latest and room >= MIN_SENTENCE_CHARS:
            parts.append(trim_to_chars(latest, room))
        elif not parts and latest:
            parts.append(trim_to_chars(latest, max_chars))

    text = " ".join(parts)
    if not text and ordered:
        # Content was all whitespace; still say something true rather than return "".
        agents = ", ".join(sorted({t.agent for t in ordered}))
        text = f"{len(ordered)} turn(s) by {agents}."
    return trim_to_chars(text, max_chars)
