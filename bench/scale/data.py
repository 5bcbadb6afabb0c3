"""The scale benchmark's stores: synthetic but realistic memories, loaded once through the write path.

A store is ``<cache>/<layout>-<size>/store`` with ``<cache>/<layout>-<size>/complete.json`` written
last: a directory without the marker is a half-built store and is rebuilt from scratch.

Rows: each tenant has sessions of 20-200 turns (a few concurrently open, so a session's turns
interleave with its neighbours' in time), 2-3 of the tenant's 5 agents a session, ~20 % of the
rows typed note/decision/fact/task/observation/error, ~3 % private (``visibility="agent"``), Zipf
words from a 20k vocabulary (as :mod:`bench.latency.recall`), synthetic vectors (no model).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import open_bench_core
from bench.latency.recall import MixedEmbedder, zipf_words

LAYOUTS = {"one-tenant": 1, "100-tenants": 100}
DEFAULT_CACHE = Path("~/.cache/memory-core-bench/scale").expanduser()
MARKER = "complete.json"
BATCH = 1000  # the write path's max_batch
TYPES = ("turn", "note", "decision", "fact", "task", "observation", "error")
TYPE_WEIGHTS = (0.80, 0.05, 0.04, 0.04, 0.03, 0.02, 0.02)
PRIVATE_SHARE = 0.03
AGENTS = 5
OPEN_SESSIONS = 4
START_S = 1_700_000_000


@dataclass(frozen=True)
class Spec:
    layout: str
    size: int

    @property
    def tenants(self) -> list[str]:
        n = LAYOUTS[self.layout]
        return ["bench"] if n == 1 else [f"t{i:03d}" for i in range(n)]

    @property
    def name(self) -> str:
        return f"{self.layout}-{self.size}"


def store_dir(cache: Path, spec: Spec) -> Path:
    return cache / spec.name / "store"


def marker(cache: Path, spec: Spec) -> dict[str, Any] | None:
    """The finished store's marker, or None when the store is missing or half-built."""
    path = cache / spec.name / MARKER
    try:
        return dict(json.loads(path.read_text()))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def finished(cache: Path) -> list[dict[str, Any]]:
    """The markers of every finished store in ``cache``."""
    found = []
    for path in cache.glob(f"*/{MARKER}"):
        with contextlib.suppress(json.JSONDecodeError):
            found.append(dict(json.loads(path.read_text())))
    return found


def _stamp(seconds: int) -> str:
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(seconds))}+00:00"


def tenant_rows(tenant: str, count: int, rng: np.random.Generator) -> Iterator[dict[str, Any]]:
    """``count`` rows of one tenant in time order: a few sessions open at once, turns round robin."""
    made = 0
    next_session = 0
    clock = START_S + int(rng.integers(0, 3600))
    open_: list[list[Any]] = []  # [session name, turns left, agents, turn index]
    while made < count:
        while len(open_) < OPEN_SESSIONS and made + sum(s[1] for s in open_) < count:
            length = min(int(rng.integers(20, 201)), count - made - sum(s[1] for s in open_))
            agents = [f"agent{a}" for a in rng.choice(AGENTS, int(rng.integers(2, 4)), replace=False)]
            open_.append([f"s{next_session:05d}", length, agents, 0])
            next_session += 1
        slot = open_[int(rng.integers(0, len(open_)))]
        session, _, agents, turn = slot
        kind = str(rng.choice(TYPES, p=TYPE_WEIGHTS))
        clock += int(rng.integers(5, 90))
        yield {"tenant": tenant, "session": session, "agent": agents[turn % len(agents)], "type": kind,
               "role": "assistant" if turn % 2 else "user",
               "visibility": "agent" if rng.random() < PRIVATE_SHARE else "tenant",
               "content": f"{tenant} {session} turn {turn}: " + " ".join(zipf_words(rng, 20)),
               "timestamp": _stamp(clock)}
        made += 1
        slot[1] -= 1
        slot[3] += 1
        if slot[1] == 0:
            open_.remove(slot)


def rows_of(spec: Spec) -> Iterator[list[dict[str, Any]]]:
    """Batches of at most BATCH rows, one tenant a batch (the write path upserts Chroma per tenant)."""
    tenants = spec.tenants
    share, extra = divmod(spec.size, len(tenants))
    for i, tenant in enumerate(tenants):
        rng = np.random.default_rng([spec.size, i])
        batch: list[dict[str, Any]] = []
        for row in tenant_rows(tenant, share + (1 if i < extra else 0), rng):
            batch.append(row)
            if len(batch) == BATCH:
                yield batch
                batch = []
        if batch:
            yield batch


class BuildInProgress(RuntimeError):
    """Another process is building this store (its build lock is held)."""


@contextlib.contextmanager
def build_lock(cache: Path, spec: Spec) -> Iterator[None]:
    """Held while a store is built, so a second run never deletes a store that is still loading."""
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"{spec.name}.lock").open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise BuildInProgress(f"{spec.name} is being built by another process") from None
        yield


def build(cache: Path, spec: Spec, *, progress_every: int = 50_000) -> dict[str, Any]:
    """Load the store through ``MemoryCore.add_memories`` (rebuilding a half-built one); returns its marker.

    Raises :class:`BuildInProgress` when another process is building it now.
    """
    found = marker(cache, spec)
    if found is not None:
        return found
    with build_lock(cache, spec):
        return marker(cache, spec) or _load(cache, spec, progress_every)


def _load(cache: Path, spec: Spec, progress_every: int) -> dict[str, Any]:
    root = cache / spec.name
    if root.exists():
        print(f"  {spec.name}: no {MARKER}, a half-built store: rebuilding it", flush=True)
        shutil.rmtree(root)
    root.mkdir(parents=True)
    core = open_bench_core(store_dir(cache, spec), MixedEmbedder())
    started = time.perf_counter()
    loaded = 0
    try:
        for batch in rows_of(spec):
            core.add_memories(batch)
            before, loaded = loaded, loaded + len(batch)
            if loaded // progress_every != before // progress_every:
                rate = loaded / (time.perf_counter() - started)
                print(f"  {spec.name}: {loaded:,} rows, {rate:,.0f} rows/s, "
                      f"~{(spec.size - loaded) / rate / 60:.1f} min left", flush=True)
    finally:
        core.close()
    seconds = time.perf_counter() - started
    done = {"layout": spec.layout, "size": spec.size, "tenants": len(spec.tenants), "load_s": round(seconds, 1),
            "rows_per_s": round(spec.size / seconds, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (root / MARKER).write_text(json.dumps(done, indent=2))  # last: its presence means "complete"
    return done
