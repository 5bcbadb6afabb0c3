"""Answer-type priors: a question asking when / how long / how many / where favours the rows holding one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from memory_core.recall import presets
from memory_core.recall.answer_type import asked_kind, asks, holds
from tests.support.backends import open_core


@pytest.mark.parametrize(("question", "kind"), [
    ("When did Maria go to the beach?", "time"),
    ("In what year did the team move to Berlin?", "time"),
    ("How long has Nate had his turtles?", "duration"),
    ("How many retries does the deploy job make?", "number"),
    ("Where did we put the staging credentials?", "place"),
    ("Which city hosts the conference?", "place"),
    ("What does Nate want to do when he goes over to Joanna's place?", None),  # a clause, not a question
    ("Why did the cache miss?", None),
])
def test_the_kind_of_answer_a_question_asks_for(question: str, kind: str | None) -> None:
    assert asked_kind(question) == kind


@pytest.mark.parametrize(("text", "kinds"), [
    ("I went camping with my family two weekends ago.", {"time", "duration", "number"}),
    ("We moved the meeting to Friday.", {"time"}),
    ("I've had them for 3 years now.", {"duration", "number"}),
    ("The job retries five times.", {"number"}),
    ("I met her at a cafe in Paris.", {"place"}),
    ("Thanks, that sounds great!", set()),
])
def test_what_a_text_holds(text: str, kinds: set[str]) -> None:
    assert {k for k in ("time", "duration", "number", "place") if holds(k, text)} == kinds


class _TopicEmbedder:
    """Only the words "beach" and "trip" carry meaning: rows differing in other words embed alike."""

    name = "topic-test"
    dimension = 3

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = np.array([0.1, float("beach" in text.lower()), float("trip" in text.lower())])
            out.append((v / np.linalg.norm(v)).tolist())
        return out


def test_a_when_question_ranks_the_matching_row_that_says_when_first(tmp_path: Path, request: pytest.FixtureRequest,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(presets.PRESETS, "no-answer-type", presets.PRESETS["balanced"].tuned({"answer.weight": 0.0}))
    core = open_core("memory", tmp_path / "d", request, embedder=_TopicEmbedder())
    try:
        core.add_memory("acme", "s1", "Maria", "Maria: the beach trip was lovely")
        dated = core.add_memory("acme", "s2", "Maria", "Maria: the beach trip was lovely, back in May").ref
        core.add_memory("acme", "s3", "John", "John: the parking garage closes early")
        question = "When was Maria's beach trip?"
        # the same meaning, and the shorter row holds the query's words more densely: it leads without the prior
        assert core.recall("acme", question, preset="no-answer-type").messages[0].ref != dated
        assert core.recall("acme", question).messages[0].ref == dated
        # a question asking for no kind of answer ranks as before
        other = "What was Maria's beach trip like?"
        assert [m.ref for m in core.recall("acme", other).messages] == \
            [m.ref for m in core.recall("acme", other, preset="no-answer-type").messages]
    finally:
        core.close()


def test_a_row_that_ends_by_asking_ranks_below_one_that_tells(tmp_path: Path, request: pytest.FixtureRequest,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(presets.PRESETS, "no-asking", presets.PRESETS["balanced"].tuned({"answer.asking_penalty": 0.0}))
    core = open_core("memory", tmp_path / "d", request, embedder=_TopicEmbedder())
    try:
        tells = core.add_memory("acme", "s1", "Maria", "Maria: the beach trip was lovely").ref
        asking = core.add_memory("acme", "s2", "Maria", "Maria: the beach trip was lovely?").ref
        question = "What was Maria's beach trip like?"
        # the same words and meaning: without the prior the newer row leads
        assert [m.ref for m in core.recall("acme", question, preset="no-asking").messages][:2] == [asking, tells]
        assert [m.ref for m in core.recall("acme", question).messages][:2] == [tells, asking]
    finally:
        core.close()


def test_asking_is_read_at_the_end_of_the_text() -> None:
    assert asks("Wow, that's great! What inspired you?  ")
    assert not asks("What inspired me? Visiting the centre last week.")
