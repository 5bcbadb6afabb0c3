"""Fusion that never falls below its own branches, and dialogue signals only on dialogue turns."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_core import MemoryCore
from tests.support.backends import open_core

T0 = datetime(2024, 3, 1, 12, tzinfo=UTC)
# what each word "means": synonyms share a direction, so only the vector branch sees them alike
TOPICS = {"kiln": 0, "ceramics": 0, "oven": 0, "firing": 0, "pottery": 0, "magazine": 1, "printer": 2,
          "lunch": 3, "parking": 4, "thursday": 5, "schedule": 5, "lit": 6}


class TopicEmbedder:
    """Deterministic: a text's vector is the sum of its words' topic directions (+ a small constant)."""

    name = "topic-test"
    dimension = 16

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = np.full(self.dimension, 0.05)
            for word in text.lower().replace(".", " ").replace("?", " ").split():
                if word in TOPICS:
                    v[TOPICS[word]] += 1.0
            out.append((v / np.linalg.norm(v)).tolist())
        return out


@pytest.fixture
def topic_core(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core(backend, tmp_path / "topic", request, embedder=TopicEmbedder())
    yield c
    c.close()


def test_when_the_vector_branch_alone_ranks_the_target_first_hybrid_recall_does_too(topic_core: MemoryCore) -> None:
    core = topic_core
    target = core.add_memory("acme", "2024-03", "memory-bank", "The kiln firing schedule moved to Thursday.",
                             type="event", timestamp=T0).ref
    for i, text in enumerate([  # chance words of the query, no meaning in common
        "When is the lit magazine out? When the printer is fixed.",
        "When is lunch? When is parking free? When is it lit?",
        "The printer is lit when the magazine is out.",
        "When lunch is late, parking is when it is.",
    ]):
        core.add_memory("acme", "2024-03", "memory-bank", text, type="event", timestamp=T0 + timedelta(days=i + 1))
    query = "when is the ceramics oven lit?"
    vector_only = core.recall("acme", query, preset="vector", limit=3)
    assert vector_only.messages[0].ref == target
    hybrid = core.recall("acme", query, limit=3)
    assert hybrid.messages[0].ref == target
    assert hybrid.messages[0].match_reason["signal"] == "confidence"
    assert "cosine" in hybrid.messages[0].match_reason


def test_rows_the_vector_branch_ranks_well_are_not_gated_out_by_a_stronger_best_row(topic_core: MemoryCore) -> None:
    core = topic_core
    core.add_memory("acme", "s", "a", "kiln firing schedule for ceramics", type="note", timestamp=T0)
    second = core.add_memory("acme", "s", "a", "pottery class moved to Thursday", type="note", timestamp=T0).ref
    for i in range(8):
        core.add_memory("acme", "s", "a", f"parking and lunch number {i}", type="note", timestamp=T0)
    res = core.recall("acme", "kiln firing ceramics", limit=5)
    assert second in [m.ref for m in res.messages]  # the vector pool's runner-up, far below the best


@pytest.mark.slow
def test_a_non_dialogue_row_does_not_borrow_the_words_of_the_row_before_it(core: MemoryCore) -> None:
    core.add_memory("acme", "2023-05", "memory-bank", "Bart won first prize at the science fair.", type="event",
                    timestamp=T0)
    after = core.add_memory("acme", "2023-05", "memory-bank", "Bart tried mango ice cream at the new shop.",
                            type="event", timestamp=T0 + timedelta(hours=1)).ref
    for i in range(6):  # other months, so the query's words are rare (BM25 gives them weight)
        core.add_memory("acme", f"2023-0{i + 6}", "memory-bank", f"Bart parked the car, note {i}.", type="event",
                        timestamp=T0 + timedelta(days=30 * (i + 1)))
    res = core.recall("acme", "science fair prize", limit=5)
    reasons = {m.ref: m.match_reason for m in res.messages}
    assert any(r.get("bm25") for r in reasons.values())
    assert after not in reasons or not reasons[after].get("bm25")
    assert after not in reasons or "neighbour_of" not in reasons[after]


def test_a_reply_turn_still_borrows_the_words_of_the_question_before_it(core: MemoryCore) -> None:
    core.add_memory("acme", "s1", "alice", "How did the science fair go?", timestamp=T0)
    reply = core.add_memory("acme", "s1", "bob", "We won first prize!", timestamp=T0 + timedelta(minutes=1)).ref
    for i in range(5):
        core.add_memory("acme", f"s{i + 2}", "carol", f"parking note {i}", timestamp=T0 + timedelta(days=i))
    res = core.recall("acme", "science fair", limit=3)
    reasons = {m.ref: m.match_reason for m in res.messages}
    assert reply in reasons and reasons[reply]["bm25"] > 0
