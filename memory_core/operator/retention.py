"""Retention: per-type policies that archive old rows, which can be restored; nothing is ever deleted.

``retention.archive_after_days`` maps a memory type to days (``{turn = 90}``). :func:`apply_retention`
archives every row of such a type written more than that many days ago that is not archived yet and not
locked: the row's ``archived_us`` is set (one graph transaction per batch), then its vector record is
deleted. An archived row leaves recall (every branch: :meth:`RecallFilters.admits` refuses it) and the
vector index, and stays in the graph: ``check_memory``, version chains, exports (``archived``) and the
entity graph still hold it. :func:`restore_archived` embeds it again and clears ``archived_us``.

Crash safety: the graph holds the truth, the vector index follows it. A run killed after the graph
transaction leaves archived rows with their vector records; the next run (and ``doctor``, finding
``vector_archived``) deletes them. A restore killed after writing the vector record leaves the row
archived with records (every ref stays archived until one graph transaction clears them all, so the same
restore command can be rerun); rerunning the restore finishes it (a run of ``apply`` in between deletes the
records again, which is as consistent). Both are SIGKILLed at every step in
tests/reliability/test_retention_crash.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph.api import MemoryRecord
from memory_core import validation as v
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.models import from_us, iso
from memory_core.refs import MEMORY, memory_ref, parse_ref
from memory_core.write.rows import embedding_text, vector_metadata

if TYPE_CHECKING:
    from memory_core.operator.consolidation import Progress
    from memory_core.operator.parts import OperatorParts

DAY_US = 86_400 * 1_000_000
BATCH = 500  # rows archived per graph transaction and vector delete


@dataclass(frozen=True)
class Archived:
    """One row a policy archives (or archived): its tenant, ref, type and time."""

    tenant: str
    ref: str
    type: str
    timestamp: str

    def to_dict(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "ref": self.ref, "type": self.type, "timestamp": self.timestamp}


@dataclass
class RetentionReport:
    """What a plan (``applied`` False) or a run found: the policies, the rows due, and the archived rows
    whose vector records an interrupted run left (deleted by a run)."""

    policies: dict[str, float]
    applied: bool
    archived: list[Archived] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        by_type: dict[str, int] = {}
        for a in self.archived:
            by_type[a.type] = by_type.get(a.type, 0) + 1
        return {"policies": self.policies, "applied": self.applied, "by_type": by_type,
                "archived": [a.to_dict() for a in self.archived], "finished": self.finished}


def due(rows: Iterable[MemoryRecord], policies: dict[str, float], now_us: int) -> list[MemoryRecord]:
    """The rows the policies archive at ``now_us``: of a type with a policy, older than its days, neither
    archived already nor locked."""
    out = []
    for r in rows:
        days = policies.get(r.node.type)
        if days is not None and r.node.archived_us is None and not r.node.locked \
                and r.node.ts_us < now_us - int(days * DAY_US):
            out.append(r)
    return out


def apply_retention(parts: OperatorParts, tenants: Iterable[str] | None = None, *, dry_run: bool = False,
                    now_us: int | None = None, progress: Progress | None = None) -> RetentionReport:
    """Archive what ``retention.archive_after_days`` says is due (``dry_run``: only list it), in every
    tenant or in ``tenants``; also finish what an interrupted run left (see the module docstring)."""
    policies = dict(parts.settings.retention.archive_after_days)
    report = RetentionReport(policies, applied=not dry_run)
    now_us = now_us if now_us is not None else time.time_ns() // 1000
    names = sorted(parts.maintenance.tenants_present()) if tenants is None else [v.tenant(t) for t in tenants]
    for tenant in names:
        rows = parts.maintenance.memory_rows(tenant)
        todo = due(rows, policies, now_us)
        report.archived += [Archived(tenant, memory_ref(r.node.id), r.node.type, iso(from_us(r.node.ts_us)))
                            for r in todo]
        if dry_run:
            continue
        report.finished += finish_archive(parts, tenant, rows)
        for start in range(0, len(todo), BATCH):
            _archive(parts, tenant, todo[start:start + BATCH], now_us)
            if progress is not None:
                progress(f"archiving {tenant}", min(start + BATCH, len(todo)), len(todo))
    return report


def finish_archive(parts: OperatorParts, tenant: str, rows: Sequence[MemoryRecord] | None = None) -> list[str]:
    """Delete the vector records archived rows still have (an archive or a consolidation killed between its
    graph commit and its vector delete); returns their refs."""
    rows = parts.maintenance.memory_rows(tenant) if rows is None else rows
    left = [memory_ref(r.node.id) for r in rows if r.node.archived_us is not None]
    still = sorted(parts.vectors.existing_ids(tenant, left)) if left else []
    if still:
        parts.vectors.delete(tenant, still)
    return still


def _archive(parts: OperatorParts, tenant: str, rows: Sequence[MemoryRecord], now_us: int) -> None:
    """Graph first (the row leaves recall at once), then the vector records."""
    with parts.writer.lock:
        fresh = parts.graph.memories(tenant, [r.node.id for r in rows])
        ids = [i for i, n in fresh.items() if n.archived_us is None and not n.locked]  # changed meanwhile: left
        with parts.graph.transaction() as tx:
            for mem_id in ids:
                tx.set_memory_state(tenant, mem_id, {"archived_us": now_us})
        if ids:
            parts.vectors.delete(tenant, [memory_ref(i) for i in ids])


def restore_archived(parts: OperatorParts, tenant: str, refs: Sequence[str]) -> list[str]:
    """Bring archived rows back into recall: embedded again into the vector index, then ``archived_us``
    cleared. NOT_FOUND (nothing restored) when a ref is no archived memory of the tenant."""
    tenant = v.tenant(tenant)
    ids = []
    for ref in refs:
        parsed = parse_ref(ref)
        if parsed.kind != MEMORY:
            raise InvalidInputError(f"{parsed} is an episode; only memories are archived.", field="ref")
        ids.append(parsed.id)
    with parts.writer.lock:
        found = {r.node.id: r for r in parts.maintenance.memory_rows(tenant, ids)}
        for mem_id in ids:
            if mem_id not in found or found[mem_id].node.archived_us is None:
                raise NotFoundError(f"{memory_ref(mem_id)} is not an archived memory of this tenant.",
                                    ref=memory_ref(mem_id))
        rows = [found[i] for i in dict.fromkeys(ids)]
        for start in range(0, len(rows), BATCH):
            chunk = rows[start:start + BATCH]
            vectors = parts.embedder.embed([embedding_text(r) for r in chunk])
            parts.vectors.upsert(tenant, [memory_ref(r.node.id) for r in chunk], vectors, [r.content for r in chunk],
                                 [vector_metadata(r.node) for r in chunk])
        with parts.graph.transaction() as tx:  # one transaction: a killed restore is rerun with the same refs
            for r in rows:
                tx.set_memory_state(tenant, r.node.id, {"archived_us": None})
    return [memory_ref(r.node.id) for r in rows]
