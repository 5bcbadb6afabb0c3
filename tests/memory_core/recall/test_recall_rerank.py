"""The balanced-rerank preset: a cross-encoder re-reads recall's best rows (memory_core/recall/rerank.py)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import EmbeddingError
from memory_core.recall import presets, rerank
from memory_core.recall.pool import Candidate
from memory_core.settings import load_settings
from testbed.mcp_harness import Caller, stdio_params
from tools.mcp.preview import expand_rows

RERANK = "balanced-rerank"


class Scorer:
    """Prefers passages holding ``favourite``; records what it read."""

    def __init__(self, favourite: str = "") -> None:
        self.favourite = favourite
        self.read: list[tuple[str, list[str]]] = []

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        self.read.append((query, list(passages)))
        return [8.0 if self.favourite and self.favourite in p else -8.0 + i * 0.01 for i, p in enumerate(passages)]


def _notes(core: MemoryCore, n: int = 12) -> list[str]:
    return [core.add_memory("acme", "s1", "planner", f"the kiln schedule note {i}: kiln firing kiln schedule",
                            type="note").ref for i in range(n)]


def test_the_model_reorders_the_head_and_confidence_still_orders_the_rows(core: MemoryCore,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    refs = _notes(core, 6)
    target = core.add_memory("acme", "s1", "planner", "kiln glaze test results came back cloudy", type="note").ref
    plain = core.recall("acme", "kiln schedule firing", limit=10)
    assert plain.messages[0].ref != target and "reranked" not in plain.diagnostics
    core._recaller.reranker = scorer = Scorer("cloudy")
    # at weight 1 the model alone orders the head
    monkeypatch.setitem(presets.PRESETS, RERANK, presets.PRESETS[RERANK].tuned({"rerank.weight": 1.0}))
    res = core.recall("acme", "kiln schedule firing", limit=10, preset=RERANK)
    assert res.messages[0].ref == target
    assert res.diagnostics["reranked"] == len(scorer.read[0][1]) >= 2
    assert scorer.read[0][0] == "kiln schedule firing"
    confs = [m.confidence or 0.0 for m in res.messages]
    assert confs == sorted(confs, reverse=True)
    # the head keeps recall's confidence range: the best row's confidence does not move
    assert confs[0] == pytest.approx(plain.messages[0].confidence or 0.0, abs=1e-6)
    assert res.messages[0].match_reason is not None and res.messages[0].match_reason["rerank"] > 0.99
    assert {m.ref for m in res.messages} <= set(refs) | {target}


def test_only_the_head_is_read_and_a_weight_of_zero_keeps_recalls_order() -> None:
    head = [(0.9 - i * 0.1, Candidate(i)) for i in range(4)]
    out = rerank.blend(head, [0.0, 0.0, 0.0, 5.0], 0.0)
    assert [c.id for _conf, c in out] == [0, 1, 2, 3]
    # at 0.4 the model's favourite passes the row just above it, not the two recall put far ahead
    # (standard scores: recall 1.34 / 0.45 / -0.45 / -1.34, the model -0.58 × 3 / 1.73)
    out = rerank.blend(head, [0.0, 0.0, 0.0, 5.0], 0.4)
    assert [c.id for _conf, c in out] == [0, 1, 3, 2]
    out = rerank.blend(head, [0.0, 0.0, 0.0, 5.0], 1.0)
    assert out[0][1].id == 3
    assert [conf for conf, _c in out] == sorted((conf for conf, _c in out), reverse=True)
    assert max(conf for conf, _c in out) == pytest.approx(0.9) and min(conf for conf, _c in out) == pytest.approx(0.6)


def test_the_blend_reads_the_models_logits_not_its_saturated_probabilities() -> None:
    # the model is sure of rows 0 and 1 (probabilities 0.9975 and 0.9999) and surer of row 1: scaled
    # probabilities would call them equal; standardised logits keep the difference and let it count
    head = [(0.9, Candidate(0)), (0.85, Candidate(1)), (0.5, Candidate(2))]
    out = rerank.blend(head, [6.0, 9.0, -9.0], 0.5)
    assert [c.id for _conf, c in out] == [1, 0, 2]
    assert head[1][1].rerank == pytest.approx(0.99988, abs=1e-5)


def test_a_turn_is_read_after_the_turn_before_it_when_the_viewer_may_see_that_turn(core: MemoryCore) -> None:
    core.add_memory("acme", "chat", "user", "which glaze did we settle on for the bowls?", type="turn")
    answer = core.add_memory("acme", "chat", "planner", "the celadon one, fired at cone six", type="turn").ref
    core.add_memory("acme", "chat", "coder", "secret: the supplier invoice is unpaid", type="turn",
                    visibility="agent")
    after_private = core.add_memory("acme", "chat", "planner", "the celadon bowls sold out", type="turn").ref
    core.add_memory("other", "chat", "user", "other tenant: which celadon glaze for the bowls?", type="turn")
    core.add_memory("other", "chat", "planner", "other tenant: the celadon bowls", type="turn")
    core._recaller.reranker = scorer = Scorer()
    res = core.recall("acme", "celadon glaze bowls", limit=10, viewer="planner", preset=RERANK)
    assert {answer, after_private} <= {m.ref for m in res.messages}
    read = scorer.read[-1][1]
    assert "which glaze did we settle on for the bowls?\nthe celadon one, fired at cone six" in read
    assert "the celadon bowls sold out" in read  # read alone: the turn before it is another agent's private one
    assert not any("secret" in p or "other tenant" in p for p in read)
    # its author sees it, so for them the turn is read after it
    core.recall("acme", "celadon glaze bowls", limit=10, viewer="coder", preset=RERANK)
    assert "secret: the supplier invoice is unpaid\nthe celadon bowls sold out" in scorer.read[-1][1]


def test_the_shipped_cross_encoder_ranks_the_answer_first() -> None:
    model = rerank.CrossEncoder(threads=1)
    logits = model.score("When did Caroline go to the support group?", [
        "I love painting sunsets with my kids on weekends.",
        "I went to the LGBTQ support group yesterday and it was powerful.",
        "Thanks Mel! It was great to catch up.",
    ])
    assert max(range(3), key=lambda i: logits[i]) == 1


@pytest.mark.slow
def test_recall_with_the_model_lifts_the_answer_over_word_overlap(core: MemoryCore,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for i in range(6):
        core.add_memory("acme", f"s{i}", "planner", f"which city should Mara move to? city move {i} question",
                        type="note")
    answer = core.add_memory("acme", "s9", "planner", "Mara relocated to Lisbon in April.", type="note").ref
    question = "Which city did Mara move to?"
    assert core.recall("acme", question, limit=5).messages[0].ref != answer
    # the shipped model, through recall, with its order alone
    monkeypatch.setitem(presets.PRESETS, RERANK, presets.PRESETS[RERANK].tuned({"rerank.weight": 1.0}))
    assert core.recall("acme", question, limit=5, preset=RERANK).messages[0].ref == answer


def test_with_context_the_model_reads_the_query_after_the_turn_it_answers(core: MemoryCore) -> None:
    _notes(core, 3)
    core._recaller.reranker = scorer = Scorer()
    context = [{"role": "assistant", "content": "What did the kiln log say?"},
               {"role": "user", "content": "   "},
               {"role": "assistant", "content": "How did the   kiln firing go on Saturday?"}]
    core.recall_with_context("acme", "The kiln schedule went well!", context, limit=5, preset=RERANK)
    assert scorer.read[-1][0] == "How did the kiln firing go on Saturday?\nThe kiln schedule went well!"
    # no query: the context is the query, read once
    core.recall_with_context("acme", "", context, limit=5, preset=RERANK)
    assert len(scorer.read) == 2 and "\n" not in scorer.read[-1][0]
    calls = len(scorer.read)
    core.recall("acme", "The kiln schedule went well!", limit=5, preset=RERANK)
    assert len(scorer.read) == calls + 1 and scorer.read[-1][0] == "The kiln schedule went well!"


def test_a_long_turn_before_the_query_is_cut_never_the_query() -> None:
    assert rerank.model_query("Where?", "") == "Where?"
    long = " ".join(f"word{i}" for i in range(200))
    read = rerank.model_query("Where did we move the kiln?", long)
    lead, query = read.split("\n")
    assert query == "Where did we move the kiln?"
    assert len(lead) <= rerank.LEAD_CHARS and long.endswith(lead) and lead.startswith("word")
    assert f" {lead}" in long  # from a word's start
    assert rerank.model_query("q" * 5_000, "x").endswith("q" * rerank.MAX_QUERY_CHARS)


def test_the_shipped_model_ranks_a_replys_memory_by_the_turn_it_answers(core: MemoryCore,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(presets.PRESETS, RERANK, presets.PRESETS[RERANK].tuned({"rerank.weight": 1.0}))
    pottery = core.add_memory("acme", "2024-05", "memory-bank", "Took a pottery class on Saturday and threw a "
                              "first bowl on the wheel.", type="event").ref
    for text in ("Loved the jazz concert in the park, it was great.", "Great dinner with my sister, loved it.",
                 "Went hiking by the lake; the weather was great."):
        core.add_memory("acme", "2024-05", "memory-bank", text, type="event")
    context = [{"role": "assistant", "content": "How was the pottery class you took on the wheel?"}]
    res = core.recall_with_context("acme", "It was great, I loved it!", context, limit=4, preset=RERANK)
    assert res.messages[0].ref == pottery


def test_a_missing_package_or_a_changed_file_fails_with_a_clear_code(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    dist = metadata.distribution(rerank.PACKAGE)
    folder = tmp_path / rerank.FOLDER
    folder.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer.json"):
        shutil.copy(Path(str(dist.locate_file(f"{rerank.FOLDER}/{name}"))), folder / name)

    def locate(rel: str) -> Path:
        return tmp_path / rel

    assert rerank.model_files(locate)[0] == folder / "model.onnx"
    with (folder / "tokenizer.json").open("a") as fh:
        fh.write(" ")
    with pytest.raises(EmbeddingError, match="sha256") as err:
        rerank.model_files(locate)
    assert err.value.code == "EMBEDDING_UNAVAILABLE"

    def missing(name: str) -> Any:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(rerank.metadata, "distribution", missing)
    with pytest.raises(EmbeddingError, match="'rerank' extra"):
        rerank.model_files()


@pytest.mark.slow
def test_a_server_configured_for_the_preset_loads_the_model_at_start(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rerank, "_SHARED", {})
    settings = load_settings(environ={}, overrides={"recall": {"preset": RERANK}, "embedding": {"threads": 1}})
    core = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder())
    try:
        for thread in core.warm_up_in_background():
            thread.join(timeout=120)
        assert rerank._SHARED[1]._model is not None
    finally:
        core.close()
    monkeypatch.setattr(rerank, "_SHARED", {})
    core = MemoryCore.open(tmp_path / "other", settings=load_settings(environ={}), embedder=HashEmbedder())
    try:
        for thread in core.warm_up_in_background():
            thread.join(timeout=120)
        assert not rerank._SHARED  # balanced has no second stage: nothing loaded
    finally:
        core.close()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_server_configured_with_the_preset_reranks_over_mcp(tmp_path: Path) -> None:
    params = stdio_params(tmp_path / "data", MEMORY_CORE_RECALL_PRESET=RERANK, MEMORY_CORE_EMBEDDING_THREADS="1")
    async with Client(params) as client:
        acme = Caller(client, "acme")
        for text in ("Took a pottery class on Saturday and threw a first bowl on the wheel.",
                     "Loved the jazz concert in the park, it was great.",
                     "Great dinner with my sister, loved it."):
            await acme.ok("add_memory", session="2024-05", agent="memory-bank", content=text, type="event")
        context = [{"role": "assistant", "content": "How was the pottery class you took on the wheel?"}]
        response = await acme.ok("recall_with_context", query="It was great, I loved it!", context=context)
        rows = expand_rows(response)
        # the stage ran (a probability that rounds to 0 is left out of the preview's reason)
        assert len(rows) >= 2 and any("rerank" in row["match_reason"] for row in rows)
        # the model read the reply after the turn it answers: the pottery class is its best row
        best = max(rows, key=lambda row: row["match_reason"].get("rerank", 0.0))
        assert "pottery" in best["content"], [(r["content"][:20], r["match_reason"]) for r in rows]


def test_pairs_are_batched_by_their_length_in_tokens_so_the_int8_model_gives_the_reference_logits() -> None:
    """The int8 model's dynamic quantisation reads the whole padded batch: batches formed by character
    length (long words, few tokens) gave other logits than the hand-written runner's batches by tokens
    (LoCoMo balanced-rerank any@5 0.855 instead of 0.857)."""
    model = rerank.CrossEncoder(threads=1)
    query = "when is the kiln fired?"
    # character order and token order disagree: long unusual words are few characters per token, or many
    passages = ["x " * 60, "supercalifragilisticexpialidocious " * 3, "the kiln is fired on thursdays",
                "ok", "glaze " * 40, "antidisestablishmentarianism", "a b c d e f g h i j", "kiln"]
    logits = model.score(query, passages)
    tokens = [model._model.token_count([(query, p)]) for p in passages]
    order = sorted(range(len(passages)), key=lambda i: tokens[i])
    expected = [0.0] * len(passages)
    for start in range(0, len(order), rerank.BATCH):
        batch = order[start:start + rerank.BATCH]
        for i, logit in zip(batch, model._model.rerank(query, [passages[i] for i in batch], batch_size=rerank.BATCH),
                            strict=True):
            expected[i] = float(logit)
    assert logits == expected
