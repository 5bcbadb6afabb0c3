"""Evidence recall metrics for LoCoMo: any@k, all@k, frac@k and MRR@20, per category and micro.

The micro average is over the scored categories (1-4); the adversarial category (5), when a benchmark
scores it, is reported as its own group and never enters the micro average.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

KS: tuple[int, ...] = (5, 10)
MRR_DEPTH = 20
APART: tuple[int, ...] = (5,)  # categories reported on their own, outside the micro average


def score_one(ranked: Sequence[str], evidence: Iterable[str], ks: Sequence[int] = KS) -> dict[str, float]:
    """Score one ranked list of source ids against the evidence ids."""
    gold = set(evidence)
    if not gold:
        raise ValueError("evidence must not be empty")
    out: dict[str, float] = {}
    for k in ks:
        hits = gold.intersection(ranked[:k])
        out[f"any@{k}"] = 1.0 if hits else 0.0
        out[f"all@{k}"] = 1.0 if len(hits) == len(gold) else 0.0
        out[f"frac@{k}"] = len(hits) / len(gold)
    rr = 0.0
    for rank, sid in enumerate(ranked[:MRR_DEPTH], start=1):
        if sid in gold:
            rr = 1.0 / rank
            break
    out[f"mrr@{MRR_DEPTH}"] = rr
    return out


@dataclass
class Scoreboard:
    """Accumulates per-question scores; reports micro averages (categories not ``apart``) and per category."""

    ks: tuple[int, ...] = KS
    apart: tuple[int, ...] = APART
    _rows: dict[int, list[dict[str, float]]] = field(default_factory=lambda: defaultdict(list))

    def add(self, category: int, ranked: Sequence[str], evidence: Iterable[str]) -> dict[str, float]:
        row = score_one(ranked, evidence, self.ks)
        self._rows[category].append(row)
        return row

    @property
    def metric_names(self) -> list[str]:
        names = [f"{m}@{k}" for k in self.ks for m in ("any", "all", "frac")]
        return [*names, f"mrr@{MRR_DEPTH}"]

    @staticmethod
    def _mean(rows: list[dict[str, float]], names: list[str]) -> dict[str, float]:
        if not rows:
            return dict.fromkeys(names, 0.0)
        return {n: sum(r[n] for r in rows) / len(rows) for n in names}

    def summary(self) -> dict[str, dict[str, float]]:
        """``{"micro": {...,"n": N}, "cat1": {...}, ...}`` with averages rounded to 4 places (micro: the
        categories not ``apart``)."""
        names = self.metric_names
        every = [r for c, rows in self._rows.items() if c not in self.apart for r in rows]
        out: dict[str, dict[str, float]] = {}
        groups = [("micro", every)] + [(f"cat{c}", self._rows[c]) for c in sorted(self._rows)]
        for label, rows in groups:
            means = {n: round(v, 4) for n, v in self._mean(rows, names).items()}
            out[label] = {**means, "n": float(len(rows))}
        return out
