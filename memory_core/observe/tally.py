"""A bucketed tally of observations: how a distribution is kept where it happens, read where it is shown.

The writer lock and group commit observe into a :class:`Tally` on their hot path (a bisect and two
additions, under a lock they already hold or a small one of its own); ``/metrics`` reads a
:meth:`Tally.snapshot` as a Prometheus histogram when it is scraped. Nothing here imports a metrics
library: the domain keeps its numbers whether or not anyone reads them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000)


@dataclass(frozen=True)
class TallySnapshot:
    """Cumulative counts per upper bound (the last bound is +Inf), their sum and their number."""

    bounds: tuple[float, ...]
    cumulative: tuple[int, ...]
    total: float
    count: int


class Tally:
    """Counts of observations per bucket (upper bounds ``bounds``, and one past the last)."""

    def __init__(self, bounds: Sequence[float] = SECONDS) -> None:
        self.bounds = tuple(float(b) for b in bounds)
        self._counts = [0] * (len(self.bounds) + 1)
        self._total = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        """Count one observation (a duration in seconds, or a size)."""
        slot = bisect_left(self.bounds, value)
        with self._lock:
            self._counts[slot] += 1
            self._total += value

    def snapshot(self) -> TallySnapshot:
        with self._lock:
            counts, total = list(self._counts), self._total
        cumulative, running = [], 0
        for c in counts:
            running += c
            cumulative.append(running)
        return TallySnapshot((*self.bounds, float("inf")), tuple(cumulative), total, running)


class Outcomes:
    """Counts of what happened, by a label from a bounded set (a row stored, or why not; a poisoning flag).

    The write path counts into it as it answers; ``/metrics`` reads a :meth:`snapshot` as a counter."""

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, labels: Sequence[str]) -> None:
        """One more of each of ``labels`` (repeats count again)."""
        if labels:
            with self._lock:
                for label in labels:
                    self._counts[label] = self._counts.get(label, 0) + 1

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._counts)
