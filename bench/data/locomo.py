"""Load a LoCoMo-format JSON file into turns and scored QA items.

The data is read by path at run time and never copied into the repository. Layout and
scoring rules: ``../shared/data/README.md`` (one memory per turn, categories 1-4 scored,
evidence ids normalised with ``D:?(\\d+):(\\d+)`` and dropped when they match no turn).
Category 5 (adversarial: the question names the wrong person, its evidence is the turn it
misattributes) is read apart (``Conversation.adversarial``), never into ``qa``: benchmarks that
report it do so in its own column, outside the scored averages.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

EVIDENCE_RE = re.compile(r"D:?(\d+):(\d+)")
SESSION_KEY_RE = re.compile(r"^session_(\d+)$")
DATE_FORMATS = ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y")
SCORED_CATEGORIES = (1, 2, 3, 4)
ADVERSARIAL = 5
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass(frozen=True)
class Turn:
    """One dialogue turn, shaped as the memory the benchmark ingests."""

    tenant: str
    session: str
    session_index: int
    position: int
    agent: str
    content: str
    text: str
    timestamp: datetime
    source_id: str


@dataclass(frozen=True)
class QAItem:
    """One scored question with its (normalised, existing) evidence turn ids."""

    tenant: str
    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, ...]
    turns: list[Turn]
    qa: list[QAItem]  # categories 1-4: the scored questions
    adversarial: list[QAItem] = field(default_factory=list)  # category 5, reported apart


def parse_session_date(value: str) -> datetime:
    """Parse ``"1:56 pm on 8 May, 2023"`` as a UTC timestamp."""
    text = " ".join(value.split())
    for fmt in DATE_FORMATS:
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise ValueError(f"unrecognised LoCoMo session date: {value!r}")


def normalise_dia_id(session: int, turn: int) -> str:
    return f"D{session}:{turn}"


def normalise_evidence(raw: Any, known: set[str]) -> tuple[str, ...]:
    """Extract every ``D<s>:<t>`` id from the raw evidence list, keeping known ids once, in order."""
    items = raw if isinstance(raw, list) else [raw]
    out: list[str] = []
    for item in items:
        for s, t in EVIDENCE_RE.findall(str(item)):
            dia = normalise_dia_id(int(s), int(t))
            if dia in known and dia not in out:
                out.append(dia)
    return tuple(out)


def turn_content(turn: dict[str, Any]) -> str:
    content = f"{turn['speaker']}: {turn.get('text', '')}"
    caption = turn.get("blip_caption")
    if caption:
        content += f" [image: {caption}]"
    return content


def _session_numbers(conv: dict[str, Any]) -> list[int]:
    nums = [int(m.group(1)) for k in conv if (m := SESSION_KEY_RE.match(k))]
    return sorted(n for n in nums if isinstance(conv.get(f"session_{n}"), list))


def _load_turns(sample_id: str, conv: dict[str, Any]) -> list[Turn]:
    turns: list[Turn] = []
    for n in _session_numbers(conv):
        when = parse_session_date(conv[f"session_{n}_date_time"])
        for pos, raw in enumerate(conv[f"session_{n}"]):
            m = EVIDENCE_RE.search(str(raw.get("dia_id", "")))
            source_id = normalise_dia_id(int(m.group(1)), int(m.group(2))) if m else f"D{n}:{pos + 1}"
            turns.append(
                Turn(
                    tenant=sample_id,
                    session=f"session_{n}",
                    session_index=n,
                    position=pos,
                    agent=str(raw["speaker"]),
                    content=turn_content(raw),
                    text=str(raw.get("text", "")),
                    timestamp=when,
                    source_id=source_id,
                )
            )
    return turns


def _load_qa(sample_id: str, items: list[dict[str, Any]], known: set[str],
             categories: tuple[int, ...] = SCORED_CATEGORIES) -> list[QAItem]:
    out: list[QAItem] = []
    for item in items:
        category = int(item.get("category", 0))
        if category not in categories:
            continue
        evidence = normalise_evidence(item.get("evidence", []), known)
        if not evidence:
            continue
        out.append(
            QAItem(
                tenant=sample_id,
                question=str(item["question"]),
                answer=str(item.get("answer", item.get("adversarial_answer", ""))),
                category=category,
                evidence=evidence,
            )
        )
    return out


def load_locomo(path: str | Path) -> list[Conversation]:
    """Load every conversation of a LoCoMo-format JSON file (a list, or one conversation)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    samples = raw if isinstance(raw, list) else [raw]
    conversations: list[Conversation] = []
    for sample in samples:
        sample_id = str(sample["sample_id"])
        conv = sample["conversation"]
        turns = _load_turns(sample_id, conv)
        known = {t.source_id for t in turns}
        speakers = tuple(str(conv[k]) for k in ("speaker_a", "speaker_b") if conv.get(k))
        qa = _load_qa(sample_id, sample.get("qa", []), known)
        adversarial = _load_qa(sample_id, sample.get("qa", []), known, (ADVERSARIAL,))
        conversations.append(Conversation(sample_id, speakers, turns, qa, adversarial))
    return conversations
