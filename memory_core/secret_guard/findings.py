"""What detection returns: a secret's kind and its span (never its value), the marker that replaces
it, and how overlapping findings join."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MARKER_PATTERN = re.compile(r"\[REDACTED:[a-z0-9-]+\]")


def marker(kind: str) -> str:
    """The text a secret of ``kind`` is replaced by."""
    return f"[REDACTED:{kind}]"


@dataclass(frozen=True, order=True)
class Finding:
    """One secret: where it is in the text (``start`` inclusive, ``end`` exclusive) and its kind."""

    start: int
    end: int
    kind: str

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "start": self.start, "end": self.end}


# the more specific kind names a merged span; generic kinds last
_GENERIC = ("url-credentials", "basic-auth", "bearer-token", "url-token", "password", "secret")


def rank(kind: str) -> int:
    """0 for a vendor's kind; generic kinds after it, the most generic last."""
    return _GENERIC.index(kind) + 1 if kind in _GENERIC else 0


def merge(findings: Iterable[Finding]) -> list[Finding]:
    """Overlapping findings joined: one span each, under the most specific kind among them."""
    out: list[Finding] = []
    for f in sorted(findings):
        if f.end <= f.start:
            continue
        if out and f.start < out[-1].end:
            last = out[-1]
            kind = last.kind if rank(last.kind) <= rank(f.kind) else f.kind
            out[-1] = Finding(last.start, max(last.end, f.end), kind)
        else:
            out.append(f)
    return out


def most_specific(findings: Iterable[Finding]) -> str:
    """The kind of the most specific of ``findings`` (at least one)."""
    return min((f.kind for f in findings), key=rank)


__all__ = ["MARKER_PATTERN", "Finding", "marker", "merge", "most_specific", "rank"]
