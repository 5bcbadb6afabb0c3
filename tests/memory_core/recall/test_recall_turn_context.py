"""A dialogue turn read with its author's previous turn (recall.turn_context)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from memory_core import MemoryCore
from memory_core.recall import presets
from tests.support.backends import open_core

T0 = datetime(2024, 5, 1, 12, tzinfo=UTC)


class _PicnicEmbedder:
    """Only "picnic" and "outing" carry meaning (the same one): every other text embeds alike."""

    name = "picnic-test"
    dimension = 2

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            v = np.array([0.2, float("picnic" in text.lower() or "outing" in text.lower())])
            out.append((v / np.linalg.norm(v)).tolist())
        return out


@pytest.fixture
def picnic_core(tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> MemoryCore:
    monkeypatch.setitem(presets.PRESETS, "no-context", presets.PRESETS["balanced"].tuned({"context.weight": 0.0}))
    # the same reply twice by one agent is what this test is about: write-time hygiene would keep only the first
    core = open_core("memory", tmp_path / "d", request, embedder=_PicnicEmbedder(), hygiene={"enabled": False})
    request.addfinalizer(core.close)
    return core


def _say(core: MemoryCore, session: str, turns: list[tuple[str, str]], start: int = 0) -> list[str]:
    return [core.add_memory("acme", session, agent, text, type="turn", timestamp=T0 + timedelta(minutes=start + i)).ref
            for i, (agent, text) in enumerate(turns)]


def test_a_reply_gains_the_similarity_of_its_authors_previous_turn(picnic_core: MemoryCore) -> None:
    # the same reply twice in one session: once after its author spoke of the picnic, once after the weather
    refs = _say(picnic_core, "s1", [
        ("maria", "maria: last weekend I went on an outing with friends from church"),
        ("john", "john: fun, what did you do there?"),
        ("maria", "maria: we did charades and a scavenger hunt"),
        ("john", "john: sounds great"),
        ("maria", "maria: the weather was cold and grey all day"),
        ("john", "john: oh no, what did you do then?"),
        ("maria", "maria: we did charades and a scavenger hunt"),
        ("john", "john: ha, I love charades"),
    ])
    after_picnic, after_weather = refs[2], refs[6]
    question = "what happened at the picnic?"  # no row holds its words: only the vector branch matches

    def order(preset: str | None = None) -> list[str]:
        # the same reply twice isolates the context signal; collapsed, the two would be one row
        ranked = [m.ref for m in picnic_core.recall("acme", question, limit=10, preset=preset,
                                                     collapse=False).messages]
        return [r for r in ranked if r in (after_picnic, after_weather)]

    assert order(preset="no-context") == [after_weather, after_picnic]  # a tie: the newer first
    assert order() == [after_picnic, after_weather]


def test_the_other_sides_turn_lends_nothing(picnic_core: MemoryCore) -> None:
    # the outing is john's turn: his next turn gains from it, maria's reply after it does not
    refs = _say(picnic_core, "s1", [
        ("john", "john: last weekend I went on an outing with friends from church"),
        ("maria", "maria: fun, what did you do there?"),
        ("john", "john: sounds great"),
        ("maria", "maria: we did charades and a scavenger hunt"),
        ("john", "john: ha, I love charades"),
    ])
    question = "what happened at the picnic?"
    on = {m.ref: m.match_reason for m in picnic_core.recall("acme", question, limit=10).messages}
    off = {m.ref: m.match_reason for m in picnic_core.recall("acme", question, limit=10, preset="no-context").messages}
    gain = {r: float((on[r] or {}).get("graph", 0.0)) - float((off[r] or {}).get("graph", 0.0)) for r in refs}
    assert gain[refs[2]] > 5 * gain[refs[3]]
    assert gain[refs[0]] == 0.0  # a session's first turn has no previous turn
