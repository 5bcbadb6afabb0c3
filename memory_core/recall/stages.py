"""Where one recall spent its time: wall milliseconds per stage, for ``diagnostics["stages_ms"]``.

The calling thread's stages follow one another (``read`` → ``embed`` → ``vector`` → ``wait`` →
``rank``, with ``rerank`` inside ``rank`` reported apart), so they add up to the recall's wall
time up to the bookkeeping around them. The branch workers (``lexical``, ``entities``) run beside
``embed`` and ``vector`` on their own threads: their times overlap the others', and ``wait`` is
what the calling thread still waited for them once its vector search was done. An operator reads
a slow recall from it (a cold index shows in ``vector``, a page-faulting graph file in ``rank``
and ``lexical``, a busy machine everywhere); ``memory-core recall --explain`` prints it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

ORDER = ("read", "embed", "vector", "lexical", "entities", "wait", "rank", "rerank")
BESIDE = ("lexical", "entities")  # run on the branch workers, beside the calling thread's stages
# the calling thread's stages: any other (a new branch that needs no embedding) ran beside them
CALLER = tuple(k for k in ORDER if k not in BESIDE)


class Stages:
    """A lap timer: each :meth:`lap` charges the time since the previous one to a stage."""

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self._ms: dict[str, float] = {}

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.add(stage, (now - self._last) * 1000)
        self._last = now

    def add(self, stage: str, ms: float) -> None:
        """Charge ``ms`` to ``stage``: a stage lapped twice (``rank`` around ``rerank``) adds up."""
        self._ms[stage] = self._ms.get(stage, 0.0) + ms

    def as_dict(self) -> dict[str, float]:
        """The stages of :data:`ORDER` in that order, then any other in the order it was charged."""
        known = [k for k in ORDER if k in self._ms]
        return {k: round(self._ms[k], 2) for k in (*known, *(k for k in self._ms if k not in ORDER))}


def timed(fn: Callable[P, T]) -> Callable[P, tuple[T, float]]:
    """``fn`` returning its value and its own wall time in ms (for a branch worker's stage)."""

    def run(*args: P.args, **kwargs: P.kwargs) -> tuple[T, float]:
        started = time.perf_counter()
        value = fn(*args, **kwargs)
        return value, (time.perf_counter() - started) * 1000

    return run


def describe(stages_ms: dict[str, float]) -> str:
    """One line for an operator: the calling thread's stages in order, the branch workers after them."""
    main = [f"{k} {v:.1f}" for k, v in stages_ms.items() if k in CALLER]
    beside = [f"{k} {v:.1f}" for k, v in stages_ms.items() if k not in CALLER]
    line = " · ".join(main) + " ms"
    return f"{line} (beside embed and vector: {', '.join(beside)} ms)" if beside else line
