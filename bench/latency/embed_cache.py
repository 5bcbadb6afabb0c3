"""A disk cache in front of an embedder, so benchmark re-runs skip the model.

Vectors are keyed by (model name, sha256 of the text) in one SQLite file outside the
repository (``$MEMORY_CORE_BENCH_CACHE`` or ``~/.cache/memory-core-bench``). The cached
embedder keeps the inner model's name and dimension: a data directory it writes is the
same as one the model wrote.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memory_core.embedding.api import Embedder
from memory_core.embedding.local import shared_fastembed, shared_minilm


def cache_dir() -> Path:
    root = os.environ.get("MEMORY_CORE_BENCH_CACHE") or str(Path.home() / ".cache" / "memory-core-bench")
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


class CachedEmbedder:
    """Wraps an :class:`Embedder`; texts seen before come from disk."""

    def __init__(self, inner: Embedder, path: Path | None = None) -> None:
        self.inner = inner
        self.name = inner.name
        self.dimension = inner.dimension
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path or cache_dir() / "embeddings.sqlite"), check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vec (key TEXT PRIMARY KEY, v BLOB)")

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self.name}\x00{text}".encode()).hexdigest()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        found: dict[str, list[float]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(f"SELECT key, v FROM vec WHERE key IN ({marks})", chunk):
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            vecs = self.inner.embed([texts[i] for i in missing])
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vec VALUES (?, ?)",
                    [(keys[i], np.asarray(v, dtype=np.float32).tobytes()) for i, v in zip(missing, vecs, strict=True)],
                )
                self._db.commit()
            for i, vec in zip(missing, vecs, strict=True):
                found[keys[i]] = vec
        return [found[k] for k in keys]





def cached_minilm() -> CachedEmbedder:
    """The shared MiniLM behind the benchmark cache."""
    return CachedEmbedder(shared_minilm())


def cached_embedder(kind: str) -> CachedEmbedder:
    """``minilm`` (the default model) or ``fastembed:<model>`` (downloaded by fastembed) behind the cache."""
    if kind.startswith("fastembed:"):
        return CachedEmbedder(shared_fastembed(kind.split(":", 1)[1]))
    return CachedEmbedder(shared_minilm())
