"""Secrets already stored: what doctor's scan reports and how its repair redacts them.

A store written before the guard existed (or under ``security.secrets = "allow"``) may hold
secrets in a memory's content, metadata or source, in a session summary (an EPISODE), and in the
Chroma record written from them. :func:`memory_secrets` and :func:`episode_secrets` say where, by
field and kind (never the value); :func:`redacted_memory` is the change a repair writes.
The repair itself (graph first, then the vector record, see :mod:`memory_core.operator.doctor.run`) is
crash-safe because the graph is the reference: a repair killed after the graph rewrite leaves a
vector record whose document differs from the graph's content, which the next scan reports as
``vector_stale`` (memories) or ``secret_stored`` (an episode's record) and the next repair rewrites.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from memory_core.secret_guard.detect import detect, redact
from memory_core.secret_guard.guard import Scan, SecretGuard
from memory_core.write.rows import content_hash

REDACT = SecretGuard("redact")


def describe(scan: Scan) -> str:
    """``content: 1 aws-access-key; metadata: 2 password`` (fields and kinds, never a value)."""
    by_field: dict[str, Counter[str]] = {}
    for x in scan.found:
        top = x.field.split(".", 1)[0].split("[", 1)[0]
        by_field.setdefault(top, Counter())[x.kind] += 1
    return "; ".join(f"{name}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
                     for name, kinds in by_field.items())


def memory_secrets(row: dict[str, Any]) -> tuple[Scan, dict[str, Any]]:
    """The secrets a stored memory row holds, and the field changes that redact them (empty: none)."""
    scan = Scan()
    content = REDACT.text(row["content"], "content", scan)
    metadata = REDACT.json(row["metadata"], "metadata", scan)
    source = REDACT.json(row["source"], "source", scan)
    changes: dict[str, Any] = {}
    if content != row["content"]:
        changes.update(content=content, content_len=len(content), content_hash=content_hash(content))
    if metadata != row["metadata"]:
        changes["metadata"] = metadata
    if source != row["source"]:
        changes.update(source=source, source_id=source.get("id"))
    return scan, changes


def redacted_text(text: str) -> str:
    """``text`` with every secret replaced (summaries, vector documents, quarantined records)."""
    found = detect(text)
    return redact(text, found) if found else text


__all__ = ["REDACT", "describe", "memory_secrets", "redacted_text"]
