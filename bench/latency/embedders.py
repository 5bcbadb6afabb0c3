"""The default embedder on fastembed next to the hand-written runner it replaced, in one process.

    python -m bench.latency.embedders [--rounds 5] [--texts 512] [--queries 200]

Both load the same sha256-verified all-MiniLM-L6-v2 int8 files. ``hand-written`` is the runner as it
was before fastembed (kept here only as the reference: our own tokenizer setup, dynamic padding by
hand, text-by-text tokenization of small batches, masked mean pooling); ``fastembed`` is
:class:`memory_core.embedding.local.MiniLMEmbedder`. Measured in alternating rounds so that the load of a
shared machine falls on both alike:

- the largest difference of their vectors over the corpus (texts of 2 to ~200 tokens);
- a recall query's embedding (``embed_query``: one text on half the cores) p50 and p90, alone and
  with a busy Python thread beside it (recall's lexical worker holds the GIL meanwhile);
- a batch's throughput (``embed`` of the corpus, batches of 32), rows/s;
- the CPU burnt in the 150 ms after a query (onnxruntime's pool threads spinning).
"""

from __future__ import annotations

import argparse
import resource
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from bench.common import print_table
from memory_core.embedding.local import (
    MODEL_SHA256,
    TOKENIZER_SHA256,
    MiniLMEmbedder,
    default_model_files,
    release_freed_heap,
    verified_file,
)
from memory_core.heavy_imports import onnx_runtime

WORDS = ("kiln firing schedule moved thursday glaze order deploy cache invoice supplier release notes agent "
         "session handoff decision the a to of and in on").split()


class HandWrittenMiniLM:
    """The runner before fastembed (reference only): one session on every core for batches, a second on
    half the cores for queries, spinning stopped, texts of small batches tokenized one by one."""

    def __init__(self, max_tokens: int = 256) -> None:
        ort, tokenizer_class = onnx_runtime()
        model, tokenizer_path = default_model_files()
        verified_file(model, MODEL_SHA256, "embedding model")
        self.tokenizer = tokenizer_class.from_file(str(verified_file(tokenizer_path, TOKENIZER_SHA256, "tokenizer")))
        self.tokenizer.enable_truncation(max_length=max_tokens)
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.session = ort.InferenceSession(str(model), self._options(ort), providers=["CPUExecutionProvider"])
        self.query = ort.InferenceSession(str(model), self._options(ort, max(1, (_cores() // 2))),
                                          providers=["CPUExecutionProvider"])
        release_freed_heap()

    @staticmethod
    def _options(ort: Any, threads: int | None = None) -> Any:
        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        options.log_severity_level = 3
        options.add_session_config_entry("session.force_spinning_stop", "1")
        return options

    def _run(self, session: Any, texts: list[str]) -> np.ndarray:
        encodings = [self.tokenizer.encode(t) for t in texts] if len(texts) <= 4 else self.tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.array([e.ids + [0] * (width - len(e.ids)) for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask + [0] * (width - len(e.ids)) for e in encodings], dtype=np.int64)
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        runs = [self._run(self.session, list(texts[i:i + 32])) for i in range(0, len(texts), 32)]
        return np.concatenate(runs).tolist()

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self._run(self.query, list(texts)).tolist()


def _cores() -> int:
    import os

    return os.cpu_count() or 1


def corpus(n: int) -> list[str]:
    rng = np.random.default_rng(7)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 150)))) for _ in range(n)]


def timed(run: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        out.append((time.perf_counter() - start) * 1000)
    return out


class BusyThread:
    """A Python thread that keeps the GIL busy (as recall's lexical worker does while the query embeds)."""

    def __enter__(self) -> BusyThread:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        return self

    def _spin(self) -> None:
        while not self._stop.is_set():
            sum(i * i for i in range(2000))

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def idle_cpu_after_query(model: Any) -> float:
    model.embed_query(["where did the kiln schedule move?"])
    before = resource.getrusage(resource.RUSAGE_SELF)
    time.sleep(0.15)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--queries", type=int, default=100, help="query embeddings per round and model")
    args = parser.parse_args()

    start = time.perf_counter()
    old = HandWrittenMiniLM()
    old.embed(["warm up"])
    old.embed_query(["warm up"])
    load_old = time.perf_counter() - start
    start = time.perf_counter()
    new = MiniLMEmbedder()
    new.warm_up()
    load_new = time.perf_counter() - start
    models: dict[str, Any] = {"hand-written": old, "fastembed": new}

    texts = corpus(args.texts)
    diff = float(np.abs(np.array(old.embed(texts)) - np.array(new.embed(texts))).max())
    qdiff = float(np.abs(np.array(old.embed_query(texts[:1])) - np.array(new.embed_query(texts[:1]))).max())
    query = ["where did the kiln firing schedule move after the glaze order?"]
    results: dict[str, dict[str, list[float]]] = {name: {"q": [], "qb": [], "rows": [], "idle": []} for name in models}
    for _round in range(args.rounds):
        for name, model in models.items():
            r = results[name]
            r["q"] += timed(lambda m=model: m.embed_query(query), args.queries)
            with BusyThread():
                r["qb"] += timed(lambda m=model: m.embed_query(query), args.queries)
            batch_ms = timed(lambda m=model: m.embed(texts), 1)[0]
            r["rows"].append(len(texts) / (batch_ms / 1000))
            r["idle"].append(min(idle_cpu_after_query(model) for _ in range(3)))

    def pct(xs: list[float], q: float) -> float:
        return float(np.percentile(xs, q))

    rows = [[name, f"{pct(r['q'], 50):.2f}", f"{pct(r['q'], 90):.2f}", f"{pct(r['qb'], 50):.2f}",
             f"{pct(r['qb'], 90):.2f}", f"{statistics.median(r['rows']):.0f}", f"{statistics.median(r['idle']):.1f}",
             f"{load_old if name == 'hand-written' else load_new:.2f}"]
            for name, r in results.items()]
    print(f"same vectors: max |diff| {diff:.2e} over the corpus (embed), {qdiff:.2e} for a query (embed_query)")
    print_table(f"{args.texts} texts, {args.rounds} alternating rounds, {args.queries} queries per round and model",
                ["model", "query p50 ms", "query p90 ms", "busy p50 ms", "busy p90 ms", "batch rows/s",
                 "idle CPU ms", "load s"], rows)


if __name__ == "__main__":
    main()
