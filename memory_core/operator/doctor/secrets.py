"""Secrets already stored: what doctor's scan reports and how its repair redacts them.

A store written before the guard existed (or under ``security.secrets = "allow"``) may hold
secrets in a memory's content, metadata or source (and hashes of them there), in the labels of the
relations it declared, in the names that address it (session, agent, …), in an entity's name,
aliases or kind, in a session summary (an EPISODE), and in the Chroma record written from them.
:func:`memory_secrets` and :func:`name_secrets` say where, by field and kind (never the value), and
the first gives the change a repair writes; names that address rows are reported, never rewritten
(renaming a session would make it another session: export, rename in the file, import).
The repair itself (graph first, then the vector record, see :mod:`memory_core.operator.doctor.run`) is
crash-safe because the graph is the reference: a repair killed after the graph rewrite leaves a
vector record whose document differs from the graph's content, which the next scan reports as
``vector_stale`` (memories) or ``secret_stored`` (an episode's record) and the next repair rewrites.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from memory_core.secret_guard.detect import detect, redact
from memory_core.secret_guard.guard import Scan, SecretGuard, digests_of
from memory_core.write.rows import content_hash

REDACT = SecretGuard("redact")
NAMES = ("session", "agent", "channel", "role", "project_id", "type", "idempotency_key")  # never rewritten


def describe(scan: Scan) -> str:
    """``content: 1 aws-access-key; metadata: 2 password`` (fields and kinds, never a value)."""
    by_field: dict[str, Counter[str]] = {}
    for x in scan.found:
        top = x.field.split(".", 1)[0].split("[", 1)[0]
        by_field.setdefault(top, Counter())[x.kind] += 1
    return "; ".join(f"{name}: " + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
                     for name, kinds in by_field.items())


def memory_secrets(row: dict[str, Any], labels: Sequence[str] = ()) -> tuple[Scan, dict[str, Any]]:
    """The secrets a stored memory row holds (and ``labels``, those of the relations it declared), and
    the field changes that redact them (empty: none; a relation label's secret is removed with the
    relation)."""
    scan = Scan()
    content = REDACT.text(row["content"], "content", scan)
    hashed = digests_of([row["content"], *(row["content"][x.start:x.end] for x in scan.found)]) if scan.found \
        else frozenset()
    metadata = REDACT.hashes(REDACT.json(row["metadata"], "metadata", scan), hashed, "metadata", scan)
    source = REDACT.hashes(REDACT.json(row["source"], "source", scan), hashed, "source", scan)
    for i, label in enumerate(labels):
        scan.note(f"relations[{i}]", detect(label))
    changes: dict[str, Any] = {}
    if content != row["content"]:
        changes.update(content=content, content_len=len(content), content_hash=content_hash(content))
    if metadata != row["metadata"]:
        changes["metadata"] = metadata
    if source != row["source"]:
        changes.update(source=source, source_id=source.get("id"))
    return scan, changes


def name_secrets(row: dict[str, Any]) -> Scan:
    """The secrets in the names that address a stored memory (session, agent, channel, …)."""
    scan = Scan()
    for name in NAMES:
        if row.get(name):
            scan.note(name, detect(str(row[name])))
    return scan


def redacted_text(text: str) -> str:
    """``text`` with every secret replaced (summaries, vector documents, quarantined records)."""
    found = detect(text)
    return redact(text, found) if found else text


__all__ = ["NAMES", "REDACT", "describe", "memory_secrets", "name_secrets", "redacted_text"]
