"""Precision and recall of the secrets guard on its corpus (tests/support/secrets_corpus.py).

    python -m bench.quality.secrets             # the guard as shipped
    python -m bench.quality.secrets --entropy   # plus detect-secrets' high-entropy plugins, to see what they add

Recall: of the corpus's secrets, how many are gone from the redacted text (no occurrence of the
raw value left), and how many were named with their expected kind. Precision: of the spans the
guard redacted, how many cover a secret (a span over a look-alike — git SHA, UUID, hash, base64
image, identifier, placeholder, version — is a false positive). Also the scan's time per KB.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from memory_core.secret_guard.detect import Finding, detect, merge, redact
from tests.support.secrets_corpus import HELD_OUT, SAMPLES, Sample


@dataclass
class Score:
    secrets: int = 0
    caught: int = 0
    kind_right: int = 0
    spans: int = 0
    true_spans: int = 0
    missed: list[str] = field(default_factory=list)
    wrong_kind: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    by_kind: Counter[str] = field(default_factory=Counter)
    caught_by_kind: Counter[str] = field(default_factory=Counter)

    @property
    def recall(self) -> float:
        return self.caught / self.secrets if self.secrets else 1.0

    @property
    def precision(self) -> float:
        return self.true_spans / self.spans if self.spans else 1.0


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    out, pos = [], text.find(value)
    while pos >= 0:
        out.append((pos, pos + len(value)))
        pos = text.find(value, pos + 1)
    return out


def score(samples: list[Sample], detector: Callable[[str], list[Finding]] = detect) -> Score:
    s = Score()
    for sample in samples:
        findings = detector(sample.text)
        redacted = redact(sample.text, findings)
        secret_spans = [span for _k, v in sample.secrets for span in _occurrences(sample.text, v)]
        for kind, value in sample.secrets:
            s.secrets += 1
            s.by_kind[kind] += 1
            if value in redacted:
                s.missed.append(f"{sample.name}: {kind}")
                continue
            s.caught += 1
            s.caught_by_kind[kind] += 1
            spans = _occurrences(sample.text, value)
            kinds = {f.kind for f in findings for a, b in spans if f.start < b and a < f.end}
            if kind in kinds:
                s.kind_right += 1
            else:
                s.wrong_kind.append(f"{sample.name}: {kind} named {sorted(kinds)}")
        for f in findings:
            s.spans += 1
            if any(f.start < b and a < f.end for a, b in secret_spans):
                s.true_spans += 1
            else:
                s.false_positives.append(f"{sample.name}: {f.kind} {sample.text[f.start:f.end][:24]!r}")
    return s


def with_entropy(text: str) -> list[Finding]:
    """The guard plus detect-secrets' Base64 (limit 4.5) and Hex (limit 3.0) entropy plugins, line by line."""
    from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString, HexHighEntropyString

    extra: list[Finding] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        for plugin in (Base64HighEntropyString(), HexHighEntropyString()):
            for found in plugin.analyze_line(filename="memory.txt", line=line):
                value = str(found.secret_value)
                pos = line.find(value)
                if pos >= 0:
                    extra.append(Finding(offset + pos, offset + pos + len(value), "generic-high-entropy"))
        offset += len(line)
    return merge([*detect(text), *extra])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entropy", action="store_true", help="add detect-secrets' entropy plugins")
    args = parser.parse_args()
    detector = with_entropy if args.entropy else detect
    print(f"detector: {'guard + entropy plugins' if args.entropy else 'guard (detect-secrets plugins + patterns)'}")
    for title, samples in (("tuning corpus (the patterns were tuned on it)", SAMPLES),
                           ("held-out corpus (written after tuning, never tuned on)", HELD_OUT)):
        report(title, samples, detector)
    text = "\n".join(x.text for x in SAMPLES)
    runs = 20
    start = time.perf_counter()
    for _ in range(runs):
        detector(text)
    per_kb = (time.perf_counter() - start) / runs / (len(text) / 1024) * 1000
    print(f"\nscan time: {per_kb:.3f} ms per KB ({len(text) / 1024:.1f} KB tuning corpus, mean of {runs} runs)")


def report(title: str, samples: list[Sample], detector: Callable[[str], list[Finding]]) -> None:
    s = score(samples, detector)
    positives = sum(1 for x in samples if x.secrets)
    print(f"\n== {title}")
    print(f"{len(samples)} samples ({positives} with secrets, {len(samples) - positives} look-alikes only), "
          f"{s.secrets} secrets of {len(s.by_kind)} kinds")
    print()
    print(f"{'kind':<20} {'secrets':>7} {'caught':>7}")
    for kind in sorted(s.by_kind):
        print(f"{kind:<20} {s.by_kind[kind]:>7} {s.caught_by_kind[kind]:>7}")
    print()
    print(f"recall     {s.recall:.3f}  ({s.caught}/{s.secrets} secrets gone from the redacted text)")
    print(f"kind       {s.kind_right / s.secrets:.3f}  ({s.kind_right}/{s.secrets} named with the expected kind)")
    print(f"precision  {s.precision:.3f}  ({s.true_spans}/{s.spans} redacted spans cover a secret)")
    for what, items in (("missed", s.missed), ("other kind", s.wrong_kind), ("false positives", s.false_positives)):
        for item in items:
            print(f"  {what}: {item}")


if __name__ == "__main__":
    main()
