"""What a preset leaves unset comes from the embedder: with a stronger model (as the removed
all-mpnet-base-v2 was) a non-dialogue row's own-text BM25 counts less; dialogue turns and explicit
presets are untouched."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from memory_core.embedding.local import HashEmbedder, MiniLMEmbedder
from memory_core.recall import fusion
from memory_core.recall.branches.api import Hit
from memory_core.recall.engine import BRANCHES
from memory_core.recall.pool import Candidate, Pool
from memory_core.recall.presets import EMBEDDER_DEFAULTS, PRESETS, resolve_preset
from memory_core.service import MemoryCore
from memory_core.settings import load_settings

SETTINGS = load_settings(environ={}).recall
STRONGER = "a-stronger-model"  # an embedder measured with bench.quality.tune to want a lighter own-text weight


@pytest.fixture(autouse=True)
def stronger_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(EMBEDDER_DEFAULTS, STRONGER, {"lexical.own": 0.3})


def test_balanced_takes_the_embedders_own_text_weight() -> None:
    assert resolve_preset(None, SETTINGS, STRONGER).lexical.own == 0.3
    assert resolve_preset(None, SETTINGS, MiniLMEmbedder.name).lexical.own is None
    assert resolve_preset(None, SETTINGS, None).lexical.own is None


@pytest.mark.parametrize("name", ["lexical", "semantic", "rsf", "rrf", "vector"])
def test_a_preset_that_sets_the_weight_keeps_it_whatever_the_embedder(name: str) -> None:
    assert resolve_preset(name, SETTINGS, STRONGER).lexical.own == PRESETS[name].lexical.own is not None


def _scored(w_own: float | None) -> dict[int, Candidate]:
    cands = {1: Candidate(1, dialogue=False, hits={"vector": Hit(1, 0.5), "bm25": Hit(1, 0.0, turn=4.0)}),  # a note
             2: Candidate(2, dialogue=True, hits={"vector": Hit(2, 0.5), "bm25": Hit(2, 4.0, turn=4.0)}),  # a turn
             3: Candidate(3, dialogue=False, hits={"vector": Hit(3, 0.9)})}  # the vector branch's best
    cfg = PRESETS["balanced"].tuned({"lexical.own": w_own})
    fusion.fuse(Pool(None, None, None, cfg, 10, cands=cands, branches=BRANCHES))  # type: ignore[arg-type]
    return cands


def test_the_own_text_weight_scales_non_dialogue_rows_only() -> None:
    default, light = _scored(None), _scored(0.3)
    cfg = PRESETS["balanced"]
    lex = (cfg.lexical.window + cfg.lexical.turn) - 0.3  # the lexical weight the note lost
    assert light[1].base == pytest.approx(default[1].base - lex)
    assert light[2].base == pytest.approx(default[2].base)  # the dialogue turn: window + turn, as before
    assert light[3].base == pytest.approx(default[3].base)
    # with MiniLM's weight the note's own words outrank the vector branch's best; lighter, they do not
    assert default[1].base > default[3].base and light[1].base < light[3].base


class QueryAware(HashEmbedder):
    """Records which path each call took: recall's query goes through embed_query, adds through embed."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed", len(texts)))
        return super().embed(texts)

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(("embed_query", len(texts)))
        return HashEmbedder.embed(self, texts)


def test_recall_embeds_its_query_and_context_through_embed_query(tmp_path: Path) -> None:
    embedder = QueryAware()
    core = MemoryCore.open(tmp_path, settings=load_settings(environ={}, overrides={"embedding": {"provider": "hash"}}),
                           embedder=embedder, in_memory_vectors=True)
    try:
        core.add_memory("t", "s1", "studio", "the kiln firing moved to Thursday", type="note")
        assert embedder.calls == [("embed", 1)]
        embedder.calls.clear()
        found = core.recall("t", "kiln firing", limit=3)
        core.recall_with_context("t", "kiln", [{"role": "user", "content": "when is the kiln firing?"}], limit=3)
    finally:
        core.close()
    assert [m.content for m in found.messages] == ["the kiln firing moved to Thursday"]
    assert embedder.calls == [("embed_query", 1), ("embed_query", 2)]
