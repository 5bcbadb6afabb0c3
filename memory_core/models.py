"""Plain dataclasses for what the service stores and returns."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

MEMORY_TYPES = frozenset({"turn", "note", "handoff", "decision", "error", "fact", "task", "observation"})
VISIBILITIES = frozenset({"tenant", "agent"})
# where a memory's content came from: a person, the agent itself, a tool's output, the web, an import, a hook
PROVENANCES = frozenset({"user", "agent", "tool", "web", "import", "hook"})
HANDOFF_SALIENCE = 0.95
DEFAULT_SALIENCE = 0.5
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_us(ts_us: int) -> datetime:
    """A stored timestamp (µs since the epoch, UTC) as an aware datetime."""
    return EPOCH + timedelta(microseconds=ts_us)


def to_us(ts: datetime) -> int:
    return (ts - EPOCH) // timedelta(microseconds=1)


def iso(ts: datetime) -> str:
    """UTC ISO-8601 with microseconds, the one timestamp format on every boundary."""
    return ts.isoformat(timespec="microseconds")


@dataclass(frozen=True)
class MemoryRow:
    """One AGENT_MEMORY as a caller sees it (library rows carry full content)."""

    ref: str
    id: int
    tenant: str
    session: str
    agent: str
    content: str
    type: str
    role: str | None
    channel: str | None
    source: dict[str, Any]
    project_id: str | None
    salience: float
    visibility: str
    timestamp: datetime
    metadata: dict[str, Any]
    content_len: int
    content_hash: str
    confidence: float | None = None
    match_reason: dict[str, Any] | None = None
    supersedes: str | None = None  # the version this row corrects (update_memory)
    valid_to: datetime | None = None  # set on a superseded or ended version: when it stopped being valid
    locked: bool = False
    valid_from: datetime | None = None  # when it became true, when the writer said so (else its timestamp)
    review_after: datetime | None = None  # when it should be checked again
    review_due: bool = False  # review_after has passed
    ended: dict[str, str | None] | None = None  # ended without a replacement: {reason, by}
    newer: str | None = None  # recall: possibly stale, a newer memory about the same things (see recall/stale.py)
    archived: datetime | None = None  # retention archived it then: out of recall and the vector index (restorable)
    provenance: str = "agent"  # where the content came from (PROVENANCES)
    flags: tuple[str, ...] = ()  # the poisoning scan's findings (memory_core.write.poisoning.FLAGS); () when clean
    # recall only: the copies of this fact among the rows ranked (this one is the newest), and the
    # others' refs, newest first (see memory_core.recall.collapse)
    repeats: int = 1
    also: tuple[str, ...] = ()

    def scored(self, confidence: float, match_reason: dict[str, Any] | None) -> MemoryRow:
        return replace(self, confidence=confidence, match_reason=match_reason)

    def stale(self, newer: str) -> MemoryRow:
        """This row marked possibly stale: ``newer`` says something else about the same things."""
        return replace(self, newer=newer)

    def with_repeats(self, also: Sequence[str]) -> MemoryRow:
        """This row standing for itself and the copies ``also`` of the same fact."""
        return replace(self, repeats=1 + len(also), also=tuple(also))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ref": self.ref,
            "tenant": self.tenant,
            "session": self.session,
            "agent": self.agent,
            "type": self.type,
            "role": self.role,
            "channel": self.channel,
            "source": self.source,
            "project_id": self.project_id,
            "salience": self.salience,
            "visibility": self.visibility,
            "timestamp": iso(self.timestamp),
            "metadata": self.metadata,
            "content": self.content,
            "provenance": self.provenance,
            "flags": list(self.flags),
        }
        if self.supersedes is not None:
            out["supersedes"] = self.supersedes
        if self.valid_from is not None:
            out["valid_from"] = iso(self.valid_from)
        if self.valid_to is not None:
            if self.ended is None:
                out["superseded"] = True
            out["valid_to"] = iso(self.valid_to)
        if self.ended is not None:
            out["ended"] = dict(self.ended)
        if self.review_after is not None:
            out["review_after"] = iso(self.review_after)
        if self.review_due:
            out["review_due"] = True
        if self.newer is not None:
            out["possibly_stale"] = True
            out["newer"] = self.newer
        if self.locked:
            out["locked"] = True
        if self.archived is not None:
            out["archived"] = iso(self.archived)
        if self.repeats > 1:
            out["repeats"] = self.repeats
            out["also"] = list(self.also)
        if self.confidence is not None:
            out["confidence"] = round(self.confidence, 4)
        if self.match_reason is not None:
            out["match_reason"] = self.match_reason
        return out


@dataclass(frozen=True)
class AddResult:
    """What an add did. ``stored`` False (a success): write-time hygiene (:mod:`memory_core.write.hygiene`)
    found nothing worth keeping, ``reason`` says why, and ``ref`` is None, or the agent's own earlier row
    (``reason`` "repeat")."""

    ref: str | None
    timestamp: datetime
    duplicate_of: str | None = None
    created: bool = True
    redacted: dict[str, int] = field(default_factory=dict)  # secrets the guard replaced: kind -> count
    stored: bool = True
    reason: str | None = None  # why it was not stored (one of memory_core.write.hygiene.REASONS)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "timestamp": iso(self.timestamp), "created": self.created,
                               "stored": self.stored}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.duplicate_of:
            out["duplicate_of"] = self.duplicate_of
        if self.redacted:
            out["redacted"] = dict(self.redacted)
        return out


@dataclass(frozen=True)
class RecentTurnsPage:
    turns: list[MemoryRow]
    next_cursor: str | None


@dataclass(frozen=True)
class Contents:
    """get_contents: ``found[i]`` answers the caller's string ``requested[i]``; ``missing`` holds
    the strings that resolved to nothing the caller may read. Together: one entry per ref asked."""

    found: list[MemoryRow]
    missing: list[str]
    requested: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckResult:
    memory: MemoryRow
    neighbours: dict[str, Any]


@dataclass
class RecallResult:
    messages: list[MemoryRow]
    gate_fallback: bool = False
    resolved_project_id: str | None = None
    operating_context_warning: str | None = None
    diagnostics: dict[str, Any] = field(default_factory=dict)
    # "newest_first": the rows are ordered by time, not confidence (``type: "handoff"``); None: by confidence
    order: str | None = None
