"""Shared benchmark helpers: timing, synthetic vectors, sample text, tables."""

from __future__ import annotations

import hashlib
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np

from memory_core import MemoryCore
from memory_core.settings import load_settings

T = TypeVar("T")

WORDS = (
    "deploy pipeline cache lease billing queue retries alert postgres migration schema index token budget "
    "handoff session agent planner coder review release rollback incident latency throughput replica shard "
    "vector graph recall summary cursor tenant config metric trace span worker scheduler backup snapshot"
).split()


class SyntheticEmbedder:
    """Deterministic pseudo-random unit vectors (384-d): bulk loads without the model's cost.

    Used only to load the 10k/100k scale rows through the real write path; the output
    of every benchmark says where it was used.
    """

    name = "synthetic-384"
    dimension = 384

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for i, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            out[i] = np.random.default_rng(seed).standard_normal(self.dimension)
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.tolist()


def sentence(i: int, words: int = 18) -> str:
    rng = np.random.default_rng(i)
    picked = " ".join(WORDS[j] for j in rng.integers(0, len(WORDS), words))
    return f"Turn {i}: the {picked}."


def timed(fn: Callable[[], T]) -> tuple[float, T]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def percentiles(samples_s: Sequence[float]) -> dict[str, float]:
    ms = sorted(x * 1000 for x in samples_s)
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[min(len(ms) - 1, int(len(ms) * 0.95))], 3),
        "n": len(ms),
    }


def open_bench_core(data_dir: Any, embedder: Any, postgres_dsn: str | None = None) -> MemoryCore:
    """A core on the embedded default stores, configured only by code (no env, no file); with
    ``postgres_dsn`` its graph is in that PostgreSQL database instead of SQLite."""
    overrides = {"storage": {"graph": "postgres", "postgres_dsn": postgres_dsn}} if postgres_dsn else {}
    return MemoryCore.open(data_dir, settings=load_settings(environ={}, overrides=overrides), embedder=embedder)


@contextmanager
def postgres_database(dsn: str | None) -> Iterator[str]:
    """``dsn`` as given, or an empty database on a throwaway server (``initdb``/``pg_ctl``, as the tests do)."""
    if dsn:
        yield dsn
        return
    from testbed.postgres import fresh_database, running_postgres

    with running_postgres() as server:
        yield fresh_database(server.dsn())


@contextmanager
def stage(label: str) -> Any:
    start = time.perf_counter()
    print(f"… {label}", flush=True)
    yield
    print(f"  done in {time.perf_counter() - start:.1f}s", flush=True)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(header)]
    print(f"\n{title}")
    print("  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True)))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)))
