"""Consolidation: near-duplicate memories merged into one canonical version, reversibly, without a model.

Rows merge only when all of these hold:

- same tenant, same visibility, same type and project; a private row (``visibility: "agent"``) only with
  rows of its own author, so no private row ever lands in a shared one;
- near in meaning: the cosine of their stored vectors is at least ``consolidation.min_cosine``;
- near in words: the Jaccard of their word sets is at least ``consolidation.min_overlap``, and they hold
  the same numbers and the same negations ("port 5433" never merges into "port 5434");
- each is current (no newer version), unlocked and not a handoff (handoffs have their own chain), and no
  undone consolidation kept them apart.

Clusters grow around a seed (the oldest row not yet taken) and every member matches the seed, so a
cluster never drifts by chaining. The canonical memory is a NEW VERSION (``update_memory``'s
machinery): the text of the member that is most typical of the cluster (highest mean word overlap with
the others; then the longest, then the newest), written through the core's journaled write path with
``supersedes_id`` = that member, a SUPERSEDES edge to every member, and every member's validity ended
at its timestamp (the newest member's, plus one microsecond) in the same graph transaction. Its metadata
keeps the others as provenance under :data:`~memory_core.versions.chain.MERGED`:
``{"merged": [refs], "also": [{ref, timestamp, agent, session}], "kept": ref}``.

Crash safety is the write path's: the canonical is journaled, then written to the vector store, then
the graph transaction writes it and ends the members; a kill before that commit leaves the journal
entry (recovery at open removes the vector record) and the members current, so a rerun finds the same
cluster again; a kill after it leaves the members ended, so a rerun never merges them twice.

:func:`undo_merge` reverses one canonical in one graph transaction: its members are current again, its
SUPERSEDES edges are removed, and the canonical itself is ended (kept, marked ``undone``, for the
record); later runs never merge those members together again.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from graph.api import SUPERSEDES, GraphTxn, MemoryRecord, mem_node
from memory_core import validation as v
from memory_core.errors import InvalidInputError, LockedError, NotFoundError, SupersededError
from memory_core.models import from_us, iso
from memory_core.operator.retention import finish_archive
from memory_core.refs import MEMORY, memory_ref, parse_ref
from memory_core.settings.schema import ConsolidationSettings
from memory_core.versions.chain import MERGED
from memory_core.write.request import AddItem
from memory_core.write.rows import embedding_text, vector_metadata

if TYPE_CHECKING:
    import numpy as np

    from memory_core.operator.parts import OperatorParts

HANDOFF = "handoff"
WORD = re.compile(r"\w+", re.UNICODE)
NEGATIONS = frozenset({"not", "no", "never", "nor", "none", "nothing", "cannot", "without", "don", "doesn", "didn",
                       "isn", "aren", "wasn", "weren", "won", "wouldn", "shouldn", "couldn", "t"})
VECTOR_PAGE = 1_000  # vectors read from the store per call
WRITE_BATCH = 32  # canonical memories written per write-path call (one embedding call, one graph transaction)
BLOCK = 512  # rows per block of the similarity matrix
Progress = Callable[[str, int, int], None]  # (what, done, total)
Rewrite = Callable[["Merge"], "Merge"]  # a merge with its canonical's text written by a model (or why not)


@dataclass(frozen=True)
class Merge:
    """One cluster: the member whose text the canonical keeps, and the others it stands for."""

    tenant: str
    kept: MemoryRecord
    others: tuple[MemoryRecord, ...]
    text: str | None = None  # the canonical's text when a model wrote it (memory_core.operator.canonical)
    text_by: dict[str, Any] | None = None  # who wrote it, or why the model's text was not used

    @property
    def members(self) -> tuple[MemoryRecord, ...]:
        return (self.kept, *self.others)

    @property
    def content(self) -> str:
        """The canonical's text: the model's when it wrote one, else the kept member's."""
        return self.kept.content if self.text is None else self.text

    def to_dict(self) -> dict[str, Any]:
        out = {"tenant": self.tenant, "kept": memory_ref(self.kept.node.id),
               "merged": [memory_ref(m.node.id) for m in self.members], "content": self.content}
        return out if self.text_by is None else {**out, "text": self.text_by}


@dataclass
class ConsolidationReport:
    """What a run found and did: per tenant the rows it compared, the merges (with the canonical's ref
    once written) and the clusters it skipped because a member changed meanwhile."""

    dry_run: bool
    scanned: dict[str, int] = field(default_factory=dict)
    merges: list[tuple[Merge, str | None]] = field(default_factory=list)
    skipped: list[tuple[Merge, str]] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)  # vector records of merged rows an interrupted run left

    @property
    def rows_retired(self) -> int:
        """How many rows stop being current (each merge of n rows leaves one)."""
        return sum(len(m.members) - 1 for m, _ref in self.merges)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run, "scanned": self.scanned, "rows_retired": self.rows_retired,
            "merges": [{**m.to_dict(), "canonical": ref} for m, ref in self.merges],
            "skipped": [{**m.to_dict(), "reason": why} for m, why in self.skipped], "finished": self.finished,
        }


@dataclass(frozen=True)
class UndoResult:
    """A reversed merge: the canonical (now ended) and the members current again."""

    canonical: str
    restored: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"canonical": self.canonical, "restored": self.restored}


# ---- deciding what is a near-duplicate ------------------------------------------------------------------
def words(text: str) -> frozenset[str]:
    """The lower-cased word set a row is compared by."""
    return frozenset(WORD.findall(text.lower()))


def words_match(a: frozenset[str], b: frozenset[str], min_overlap: float) -> bool:
    """Near in words: Jaccard at least ``min_overlap``, and the same numbers and negations."""
    if not a or not b:
        return a == b
    if {w for w in a if _numeric(w)} != {w for w in b if _numeric(w)} or (a & NEGATIONS) != (b & NEGATIONS):
        return False
    return len(a & b) / len(a | b) >= min_overlap


def _numeric(word: str) -> bool:
    return any(c.isdigit() for c in word)


def group_key(node: Any) -> tuple[str, str, str, str]:
    """Rows merge only within one key: visibility, the author of a private row, type, project."""
    private = node.visibility == "agent"
    return (node.visibility, node.agent if private else "", node.type, node.project_id or "")


def mergeable(row: MemoryRecord) -> bool:
    """A current, unarchived, unlocked memory that is not a handoff."""
    n = row.node
    return n.valid_to_us is None and n.archived_us is None and not n.locked and n.type != HANDOFF


def plan_tenant(parts: OperatorParts, tenant: str, cfg: ConsolidationSettings | None = None,
                progress: Progress | None = None) -> tuple[int, list[Merge]]:
    """The merges a run would make in ``tenant`` now: (rows compared, merges), oldest cluster first."""
    cfg = cfg or parts.settings.consolidation
    rows = parts.maintenance.memory_rows(tenant)
    apart = _kept_apart(rows)
    candidates = [r for r in rows if mergeable(r)]
    vectors = _vectors(parts, tenant, candidates, progress)
    candidates = [r for r in candidates if r.node.id in vectors]
    groups: dict[tuple[str, str, str, str], list[MemoryRecord]] = {}
    for r in candidates:
        groups.setdefault(group_key(r.node), []).append(r)
    merges: list[Merge] = []
    for members in groups.values():
        if len(members) > 1:
            members.sort(key=lambda r: r.node.key)
            merges += _clusters(tenant, members, vectors, apart, cfg)
    merges.sort(key=lambda m: min(r.node.key for r in m.members))
    return len(candidates), merges


def _kept_apart(rows: Sequence[MemoryRecord]) -> dict[int, set[int]]:
    """Member id -> the undone merges it took part in: members of one undone merge never merge again."""
    apart: dict[int, set[int]] = {}
    for r in rows:
        mark = r.node.metadata.get(MERGED)
        if isinstance(mark, dict) and mark.get("undone"):
            for ref in mark.get("merged", []):
                try:
                    apart.setdefault(parse_ref(ref).id, set()).add(r.node.id)
                except InvalidInputError:
                    continue
    return apart


def _vectors(parts: OperatorParts, tenant: str, rows: Sequence[MemoryRecord],
             progress: Progress | None) -> dict[int, list[float]]:
    """The stored vector of each row (rows the vector store lacks are left out: doctor's business)."""
    out: dict[int, list[float]] = {}
    for start in range(0, len(rows), VECTOR_PAGE):
        page = rows[start:start + VECTOR_PAGE]
        found = parts.vectors.embeddings(tenant, [memory_ref(r.node.id) for r in page])
        out.update({parse_ref(ref).id: vec for ref, vec in found.items()})
        if progress is not None:
            progress(f"reading {tenant}", min(start + VECTOR_PAGE, len(rows)), len(rows))
    return out


def _clusters(tenant: str, rows: list[MemoryRecord], vectors: dict[int, list[float]], apart: dict[int, set[int]],
              cfg: ConsolidationSettings) -> list[Merge]:
    """Seeded clusters over one group's rows (oldest first): each row not yet taken seeds a cluster of the
    later rows that match it in meaning and in words."""
    import numpy as np  # loads with the command, not with memory_core

    matrix = np.asarray([vectors[r.node.id] for r in rows], dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix /= np.where(norms == 0, 1.0, norms)
    near = _near_pairs(matrix, cfg.min_cosine)
    texts = [words(r.content) for r in rows]
    taken = [False] * len(rows)
    out: list[Merge] = []
    for i in range(len(rows)):
        if taken[i] or not near[i]:
            continue
        members = [i]
        for j in near[i]:
            if len(members) >= cfg.max_group:
                break
            if taken[j] or not words_match(texts[i], texts[j], cfg.min_overlap):
                continue
            if any(apart.get(rows[j].node.id, set()) & apart.get(rows[m].node.id, set()) for m in members):
                continue
            members.append(j)
        if len(members) < 2:
            continue
        for m in members:
            taken[m] = True
        kept = _typical(members, texts, rows)
        out.append(Merge(tenant, rows[kept], tuple(rows[m] for m in members if m != kept)))
    return out


def _near_pairs(matrix: np.ndarray, min_cosine: float) -> list[list[int]]:
    """For each row, the later rows (in order) at least ``min_cosine`` near it; blockwise, so memory stays
    at BLOCK rows of the similarity matrix."""
    import numpy as np

    n = len(matrix)
    near: list[list[int]] = [[] for _ in range(n)]
    for start in range(0, n, BLOCK):
        sims = matrix[start:start + BLOCK] @ matrix.T
        rows, cols = np.nonzero(sims >= min_cosine - 1e-6)
        for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
            if c > start + r:
                near[start + r].append(c)
    return near


def _typical(members: list[int], texts: list[frozenset[str]], rows: list[MemoryRecord]) -> int:
    """The member the canonical keeps the text of: the highest mean word overlap with the others, then
    the longest text, then the newest."""
    def overlap(a: frozenset[str], b: frozenset[str]) -> float:
        return len(a & b) / len(a | b) if a | b else 1.0

    def score(i: int) -> tuple[float, int, tuple[int, int]]:
        mean = sum(overlap(texts[i], texts[j]) for j in members if j != i) / (len(members) - 1)
        return (round(mean, 9), len(rows[i].content), rows[i].node.key)

    return max(members, key=score)


# ---- writing ----------------------------------------------------------------------------------------------
def consolidate(parts: OperatorParts, tenants: Iterable[str] | None = None, *, dry_run: bool = False,
                progress: Progress | None = None, rewrite: Rewrite | None = None) -> ConsolidationReport:
    """Merge every tenant's near-duplicates (``tenants``: only those), or with ``dry_run`` only say what
    would merge. Safe to rerun at any time, and after a kill: see the module docstring. ``rewrite``: the
    model-written canonical text (:mod:`memory_core.operator.canonical`), never asked on a dry run."""
    report = ConsolidationReport(dry_run)
    names = sorted(parts.maintenance.tenants_present()) if tenants is None else [v.tenant(t) for t in tenants]
    for tenant in names:
        if not dry_run:
            report.finished += finish_archive(parts, tenant)
        scanned, merges = plan_tenant(parts, tenant, progress=progress)
        report.scanned[tenant] = scanned
        if dry_run:
            report.merges += [(m, None) for m in merges]
        else:
            write_merges(parts, merges, report, progress, rewrite)
    return report


def write_merges(parts: OperatorParts, merges: Sequence[Merge], report: ConsolidationReport,
                 progress: Progress | None = None, rewrite: Rewrite | None = None) -> None:
    """Write planned merges (:func:`plan_tenant`) in batches; clusters a member of which changed since the
    plan (corrected, merged, locked by another writer) are skipped into ``report.skipped``. ``rewrite`` gives
    each batch's canonical texts before the batch is written (outside the writer lock)."""
    for start in range(0, len(merges), WRITE_BATCH):
        batch = list(merges[start:start + WRITE_BATCH])
        _write(parts, batch if rewrite is None else [rewrite(m) for m in batch], report)
        if progress is not None:
            progress(f"merging {merges[0].tenant}", min(start + WRITE_BATCH, len(merges)), len(merges))


def _write(parts: OperatorParts, merges: list[Merge], report: ConsolidationReport) -> None:
    """Write a batch of canonicals in one write-path call; when a member changed meanwhile (another writer
    corrected, merged or locked it), write them one by one and skip the clusters that cannot be."""
    try:
        refs = _write_batch(parts, merges)
    except (SupersededError, LockedError) as exc:
        if len(merges) == 1:
            report.skipped.append((merges[0], f"{exc.code}: {exc}"))
            return
        for m in merges:
            _write(parts, [m], report)
        return
    report.merges += list(zip(merges, refs, strict=True))


def _write_batch(parts: OperatorParts, merges: list[Merge]) -> list[str]:
    items = [canonical_item(m) for m in merges]

    def end_others(tx: GraphTxn, written: list[tuple[int, int]]) -> None:
        for index, new_id in written:
            merge, ts_us = merges[index], _ts_of(merges[index])
            for other in merge.others:
                if not tx.supersede_memory(merge.tenant, other.node.id, ts_us):
                    raise SupersededError(f"{memory_ref(other.node.id)} changed while it was being consolidated "
                                          f"into {memory_ref(new_id)}.", ref=memory_ref(other.node.id))
            for member in merge.members:  # out of the vector index: they would crowd the canonical out of it
                tx.set_memory_state(merge.tenant, member.node.id, {"archived_us": ts_us})

    results = parts.writer.add_many(
        items, edges=[[(mem_node(r.node.id), SUPERSEDES) for r in m.members] for m in merges],
        supersedes=[m.kept.node.id for m in merges], linked=end_others)
    for tenant in sorted({m.tenant for m in merges}):  # a kill before this: the next run (or doctor) finishes it
        parts.vectors.delete(tenant, [memory_ref(r.node.id) for m in merges if m.tenant == tenant for r in m.members])
    refs = [r.ref for r in results if r.ref is not None]
    assert len(refs) == len(results), "an unscreened write is always stored"  # hygiene screens agents' adds only
    return refs


def _ts_of(merge: Merge) -> int:
    """The canonical's time: just after its newest member (so every member ends when it begins, and dated
    recall still finds the fact at about the time it was written)."""
    return max(r.node.ts_us for r in merge.members) + 1


def canonical_item(merge: Merge) -> AddItem:
    """The add that writes ``merge``'s canonical memory: the kept member's fields, its text (or the model's:
    :mod:`memory_core.operator.canonical`, which then says so in the provenance), its provenance."""
    kept = merge.kept.node
    mark: dict[str, Any] = {
        "kept": memory_ref(kept.id),
        "merged": [memory_ref(r.node.id) for r in merge.members],
        "also": [{"ref": memory_ref(r.node.id), "timestamp": iso(from_us(r.node.ts_us)), "agent": r.node.agent,
                  "session": r.node.session} for r in merge.others],
    }
    if merge.text_by is not None:
        mark["text"] = merge.text_by
    item: AddItem = {
        "tenant": merge.tenant, "session": kept.session, "agent": kept.agent, "content": merge.content,
        "type": kept.type, "role": kept.role, "channel": kept.channel, "project_id": kept.project_id,
        "visibility": kept.visibility, "source": dict(kept.source), "metadata": {**kept.metadata, MERGED: mark},
        "salience": max(r.node.salience for r in merge.members), "timestamp": from_us(_ts_of(merge)),
    }
    return item


# ---- undoing ----------------------------------------------------------------------------------------------
def undo_merge(parts: OperatorParts, tenant: str, ref: str) -> UndoResult:
    """Reverse the consolidation that wrote ``ref``: its members current again, ``ref`` ended and marked
    undone (one graph transaction). NOT_FOUND when ``ref`` is no canonical of the tenant; SUPERSEDED when
    a newer version or a later merge replaced it (undo that one first); LOCKED when it is locked."""
    tenant = v.tenant(tenant)
    parsed = parse_ref(ref)
    if parsed.kind != MEMORY:
        raise InvalidInputError(f"{parsed} is an episode; only memories are consolidated.", field="ref")
    with parts.writer.lock:
        node = parts.graph.memory(tenant, parsed.id)
        mark = None if node is None else node.metadata.get(MERGED)
        if node is None or not isinstance(mark, dict) or mark.get("undone"):
            raise NotFoundError(f"{parsed} is not a consolidated memory of this tenant.", ref=str(parsed))
        if node.valid_to_us is not None:
            raise SupersededError(f"{parsed} was replaced by a newer version or a later consolidation; "
                                  "undo or revert that one first.", ref=str(parsed))
        if node.locked:
            raise LockedError(f"{parsed} is locked; unlock it first.", ref=str(parsed))
        ids = [parse_ref(r).id for r in mark.get("merged", [])]
        members = parts.graph.memories(tenant, ids)
        ended = [m for m in members.values() if m.valid_to_us == node.ts_us]
        back = [r for r in parts.maintenance.memory_rows(tenant, ids) if r.node.archived_us == node.ts_us]
        now_us = max(time.time_ns() // 1000, node.ts_us + 1)
        if back:  # the members' vector records first: killed before the graph commit, the merge still stands
            parts.vectors.upsert(tenant, [memory_ref(r.node.id) for r in back],
                                 parts.embedder.embed([embedding_text(r) for r in back]), [r.content for r in back],
                                 [vector_metadata(r.node) for r in back])
        with parts.graph.transaction() as tx:
            for m in ended:
                tx.set_memory_state(tenant, m.id, {"valid_to_us": None})
            for r in back:
                tx.set_memory_state(tenant, r.node.id, {"archived_us": None})
            tx.erase_edges([(mem_node(node.id), mem_node(m), SUPERSEDES) for m in members])
            tx.set_memory_state(tenant, node.id, {"supersedes_id": None, "valid_to_us": now_us, "archived_us": now_us})
            tx.rewrite_memory(tenant, node.id, {"metadata": {**node.metadata,
                                                             MERGED: {**mark, "undone": iso(from_us(now_us))}}})
        parts.vectors.delete(tenant, [memory_ref(node.id)])
    return UndoResult(str(parsed), [memory_ref(m.id) for m in sorted(ended, key=lambda m: m.id)])
