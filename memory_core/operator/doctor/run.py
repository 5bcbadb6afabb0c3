"""Doctor: do Chroma, each tenant's lexical index and the graph agree? Repair what can be
repaired without losing data.

The graph's memory rows (SQLite or PostgreSQL) are the reference: they hold every field and the
content, and the graph's kept counts, the vector record and the lexical rows can be rebuilt from them.
Finding kinds, and what :func:`repair_stores` does about each::

    vector_store_wedged  a timed-out vector-store call is still stuck in the store
                                                              -> nothing (reported; restart if it persists)
    journal_pending   an add/delete interrupted by a crash    -> writer.recover(): finish or roll back
    graph_stale       the graph's kept counts differ from its rows -> recount them
    graph_missing     a memory's AGENT/SESSION node or AUTHORED_BY/IN_SESSION edge is gone
                                                              -> recreate it from the memory row
    dangling_edge     an edge whose end is gone or foreign    -> delete the edge
                      (MENTIONS/RELATED rows too; an entity nothing mentions stays, unseen)
    vector_orphan     Chroma record with no memory row        -> restore the memory from the record's
                      document + metadata when they hold tenant, session, agent, type and ts_us;
                      otherwise save the record to <data_dir>/doctor/quarantine-*.jsonl, then delete it
    vector_missing    memory row with no Chroma record        -> re-embed the content and upsert
    vector_stale      record document/metadata differ        -> re-embed from the graph's row and upsert
    lexical_stale     FTS row with no memory, or indexed text differs from the content
    lexical_missing   memory row absent from the FTS table    -> both: rebuild that tenant's FTS table
                      (the same kinds cover the tenant's lexical window table, rebuilt with it)
    version_open      a memory a newer version corrects (its supersedes_id) is still current
    version_unlinked  a newer version lacks its SUPERSEDES edge to the one it corrects
                                                              -> both: end the old version at the newer
                      one's time and relink it (after orphans are restored: a lost old version comes
                      back from its vector record current and unlinked)
    secret_stored     a memory's content, metadata or source (or a hash there of a secret in it), or a
                      session summary, holds a secret in clear (stored before the secrets guard existed, or
                      under security.secrets = "allow"; not reported under "allow")
                                                        -> redact it in the graph (its lexical index and
                      window follow in the same transaction), then rewrite its vector record (document
                      and embedding) from the redacted text; then purge the old text from the SQLite
                      file (index segments, freed pages, WAL). A relation labelled with a secret is
                      removed; an entity whose name, alias or kind is a secret, or that the extractor
                      named after one (``ent:<id>``), is removed with its mentions and relations. A name
                      that addresses the memory (session, agent, channel, …) holding a secret is
                      reported and left as it is (renaming it would make it address other rows).
    version_self      a memory names itself as the version it corrects
    version_cycle     versions correct each other in a cycle (none of them is current)
    version_fork      two versions correct the same one      -> all three: the linked rows become one
                      chain by time, the newest current (see :mod:`memory_core.operator.doctor.versions`)
    id_sequence       the shared id sequence is past the largest id a ref can name
                                                              -> move it back to one past the largest
                                                                 id in use
    id_unnameable     a row whose id is past that range       -> nothing (reported: no ref reaches it)

An unacknowledged add (journal entry present) is rolled back, never restored: the caller
saw it fail. A restore never deletes the record it restores from: it is journaled as a
``restore`` (see :mod:`memory_core.write.path`), so a repair killed at any step leaves the
record an orphan for the next repair; a memory restored under a new ref (its id was taken)
carries ``restored_from``, so a repeated repair deletes the leftover record instead of
restoring it twice. An unrebuildable record is deleted only after its quarantine line is
fsynced. A lexical rebuild re-indexes the tenant's own rows only (FTS5 ``rebuild`` on
the shared external-content table would index every tenant's rows, so it is never used).
A secret's redaction writes the graph first: killed before the vector record is rewritten, the
record's document differs from the redacted content (``vector_stale`` for a memory,
``secret_stored`` for an episode's record), so the next repair finishes it. Restored orphans and
quarantined records are redacted too (the secrets guard never lets doctor write a secret back).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from graph.api import SUPERSEDES, MemoryRecord
from graph.maintenance_api import MissingStructure
from memory_core.entities import doctor as entity_doctor
from memory_core.errors import InvalidInputError, InvalidRefError, MemoryCoreError
from memory_core.models import from_us
from memory_core.operator.doctor.scan import (
    Finding,
    StoreCounts,
    all_tenants,
    memory_rows,
    scan,
    secret_findings,
    secret_relations,
    version_findings,
)
from memory_core.operator.doctor.secrets import memory_secrets, name_secrets, redacted_text
from memory_core.refs import EPISODE, MAX_ID, MEMORY, episode_ref, memory_ref, parse_ref
from memory_core.sessions.episodes import episode_vector_metadata
from memory_core.store_errors import graph_errors
from memory_core.vectors.deadline import vector_store_wedged
from memory_core.write.request import AddItem
from memory_core.write.rows import content_hash, embedding_text, vector_metadata

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

EMBED_BATCH = 64
EPISODE_FIELDS = ("id", "tenant", "session", "summary", "summary_source", "summary_error", "first_id", "last_id",
                  "turn_count", "last_ts_us", "handoff_id", "created_us", "updated_us")
VECTOR_KINDS = ("vector_missing", "vector_stale")
LEXICAL_KINDS = ("lexical_stale", "lexical_missing")


@dataclass(frozen=True)
class Repair:
    """One thing :func:`repair_stores` did."""

    kind: str
    tenant: str
    ref: str | None
    action: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DoctorReport:
    """Counts per tenant and store, findings, and (after a repair) what was done and what remains."""

    counts: list[StoreCounts]
    findings: list[Finding]
    repairs: list[Repair] = field(default_factory=list)
    remaining: list[Finding] | None = None
    recovered_at_open: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.findings if self.remaining is None else self.remaining)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ok": self.ok,
            "counts": [c.to_dict() for c in self.counts],
            "findings": [f.to_dict() for f in self.findings],
            "recovered_at_open": self.recovered_at_open,
        }
        if self.remaining is not None:
            out["repairs"] = [r.to_dict() for r in self.repairs]
            out["remaining"] = [f.to_dict() for f in self.remaining]
        return out


def _wedged(parts: OperatorParts) -> Finding | None:
    sentence = vector_store_wedged(parts.vectors)
    return None if sentence is None else Finding("vector_store_wedged", "", None, sentence)


def check_stores(parts: OperatorParts) -> DoctorReport:
    """Compare the stores of every tenant (operator-wide); changes nothing."""
    wedged = _wedged(parts)
    if wedged is not None:  # a scan would only be refused: say why instead
        return DoctorReport([], [wedged], recovered_at_open=list(parts.recovered))
    with graph_errors("checking the stores"), parts.writer.lock.holding("doctor check"):
        counts, findings = scan(parts)
    return DoctorReport(counts, findings, recovered_at_open=list(parts.recovered))


def repair_stores(parts: OperatorParts) -> DoctorReport:
    """Check, fix every finding that can be fixed without losing data, and check again."""
    wedged = _wedged(parts)
    if wedged is not None:
        return DoctorReport([], [wedged], [], [wedged], recovered_at_open=list(parts.recovered))
    with graph_errors("repairing the stores"), parts.writer.lock.holding("repair"):
        parts.graph.invalidate()  # rows may have changed underneath (damage, a restored backup)
        _, before = scan(parts)
        done = [Repair("journal_pending", r["tenant"], r["ref"], r["action"]) for r in parts.writer.recover()]
        done += _reset_id_sequence(parts)
        _, found = scan(parts)  # after recovery: records of rolled-back adds are gone, not orphans
        kinds = {f.kind for f in found}
        if "graph_stale" in kinds:
            with parts.graph.transaction() as tx:
                tx.rebuild_counts()
            done += [Repair(f.kind, f.tenant, f.ref, "recounted the graph's rows")
                     for f in found if f.kind == "graph_stale"]
        if "graph_missing" in kinds:
            done += _restore_structure(parts)
        if "dangling_edge" in kinds:
            done += _delete_dangling_edges(parts)
        # lexical rows left by lost memories are rebuilt first: a restore re-indexes under the same rowid
        for tenant in sorted({f.tenant for f in found if f.kind in LEXICAL_KINDS}):
            done.append(_rebuild_lexical(parts, tenant))
        done += _restore_orphans(parts, [f for f in found if f.kind == "vector_orphan"])
        # read afresh: restores and the dangling-edge repair above change what holds a secret (an entity a
        # lost memory mentioned is unmentioned now)
        redacted = _redact_secrets(parts, _secret_findings(parts) if parts.writer.guard.active else [])
        done += redacted + _purge_rewritten(parts, sorted({r.tenant for r in redacted if r.ref}))
        done += _reembed(parts, [f for f in found if f.kind in VECTOR_KINDS])  # reads the rows redacted above
        done += _relink_versions(parts)
        parts.graph.invalidate()
        counts, remaining = scan(parts)
    return DoctorReport(counts, before, done, remaining, recovered_at_open=list(parts.recovered))


def _relink_versions(parts: OperatorParts) -> list[Repair]:
    """Close, relink and straighten broken version chains (read afresh: restores above may have made
    them), one graph transaction per tenant."""
    parts.graph.invalidate()
    done: list[Repair] = []
    for tenant in all_tenants(parts):
        fixes = version_findings(parts, tenant, {r["id"]: r for r in memory_rows(parts, tenant)})
        if not fixes:
            continue
        with parts.graph.transaction() as tx:
            for finding, fix in fixes:
                for mem_id, state in fix.states.items():
                    tx.set_memory_state(tenant, mem_id, state)
                if fix.unlink:
                    tx.erase_edges([(memory_ref(new), memory_ref(old), SUPERSEDES) for new, old in fix.unlink])
                for new, old in fix.link:
                    tx.write_edge(tenant, memory_ref(new), memory_ref(old), SUPERSEDES)
                done.append(Repair(finding.kind, tenant, finding.ref,
                                   fix.describe() or "mended with the finding before it (the same rows)"))
    return done


def _redact_secrets(parts: OperatorParts, findings: list[Finding]) -> list[Repair]:
    """Redact stored secrets: each memory's row in one graph transaction (content, hash, lexical
    index and window, metadata, source), then its vector record from the redacted row; each
    summary likewise. The graph goes first, so a kill in between leaves a difference the next scan
    reports (see the module docstring)."""
    by_tenant: dict[str, list[str]] = {}
    for f in findings:
        by_tenant.setdefault(f.tenant, []).append(str(f.ref))
    done: list[Repair] = []
    for tenant, all_refs in sorted(by_tenant.items()):
        entities = [r for r in all_refs if r.startswith("ent:")]
        if entities:  # one transaction: an entity named by a secret goes whole (its mentions and relations)
            with parts.graph.transaction() as tx:
                for ref in entities:
                    tx.erase_entity(tenant, int(ref.split(":", 1)[1]))
            done += [Repair("secret_stored", tenant, ref, "removed the entity named by a secret, with its "
                                                          "mentions and relations") for ref in entities]
        refs = [r for r in all_refs if not r.startswith("ent:")]
        mem_ids = [parse_ref(r).id for r in refs if parse_ref(r).kind == MEMORY]
        rows = memory_rows(parts, tenant, mem_ids)
        labels = secret_relations(parts, tenant)
        for start in range(0, len(rows), EMBED_BATCH):
            chunk = rows[start : start + EMBED_BATCH]
            changed = [(row, memory_secrets(row)[1], labels.get(row["id"], [])) for row in chunk]
            with parts.graph.transaction() as tx:
                for row, changes, relations in changed:
                    if changes:
                        tx.rewrite_memory(tenant, row["id"], changes)
                    if relations:  # a label is no text to redact in place: the relation goes
                        tx.erase_entity_links(tenant, [], relations)
            clean = [MemoryRecord.from_row({**row, **changes}) for row, changes, _r in changed]
            ids = [memory_ref(r.node.id) for r in clean]
            vectors = parts.embedder.embed([embedding_text(r) for r in clean])
            parts.vectors.delete(tenant, ids)  # upsert merges metadata: no stale key (an old source_id) survives
            parts.vectors.upsert(tenant, ids, vectors, [r.content for r in clean],
                                [vector_metadata(r.node) for r in clean])
            done += [Repair("secret_stored", tenant, memory_ref(row["id"]), _redacted(changes, relations, row))
                     for row, changes, relations in changed]
        for ep_id in [parse_ref(r).id for r in refs if parse_ref(r).kind == EPISODE]:
            episode = parts.graph.episode(tenant, ep_id)
            if episode is None:
                continue
            row = {name: getattr(episode, name) for name in EPISODE_FIELDS}
            row["summary"] = redacted_text(episode.summary)
            if row["summary"] != episode.summary:
                with parts.graph.transaction() as tx:
                    tx.write_episode(row)
            ref = episode_ref(ep_id)
            parts.vectors.upsert(tenant, [ref], parts.embedder.embed([row["summary"]]), [row["summary"]],
                                [episode_vector_metadata(row)])
            done.append(Repair("secret_stored", tenant, ref, "redacted the secrets in the summary and its vector "
                                                             "record"))
    return done


def _redacted(changes: dict[str, Any], relations: list[Any], row: dict[str, Any]) -> str:
    """What a repair did to one memory holding secrets."""
    done = []
    if changes:
        done.append("redacted the secrets in the graph, the lexical index and the vector record (document and "
                    "embedding)")
    if relations:
        done.append(f"removed {len(relations)} relation(s) labelled with a secret")
    if name_secrets(row).found:
        done.append("left the names that address it as they are (a renamed session is another session): export "
                    "the tenant, rename them in the file, import it into a fresh store")
    return "; ".join(done) or "rewrote the vector record from the graph"


def _secret_findings(parts: OperatorParts) -> list[Finding]:
    parts.graph.invalidate()
    return [f for tenant in all_tenants(parts)
            for f in secret_findings(parts, tenant, {r["id"]: r for r in memory_rows(parts, tenant)})]


def _purge_rewritten(parts: OperatorParts, tenants: list[str]) -> list[Repair]:
    """The old text of redacted rows out of the graph store's files (index segments, freed pages, WAL)."""
    if not tenants:
        return []
    if parts.maintenance.purge_rewritten(tenants):
        return [Repair("secret_stored", t, None, "purged the old text from the graph store's files") for t in tenants]
    return [Repair("secret_stored", t, None, "the graph store keeps old row versions until VACUUM FULL "
                                             "(see docs/secrets.md)") for t in tenants]


def _reset_id_sequence(parts: OperatorParts) -> list[Repair]:
    """A sequence moved past the nameable range goes back to one past the largest id in use."""
    space = parts.maintenance.id_space(MAX_ID)
    if space.next_id <= MAX_ID:
        return []
    next_id = (space.largest or 0) + 1
    parts.maintenance.reset_id_sequence(next_id)
    return [Repair("id_sequence", "", None, f"moved the id sequence back from {space.next_id} to {next_id}, one "
                   "past the largest id in use")]


def _restore_structure(parts: OperatorParts) -> list[Repair]:
    missing = parts.maintenance.missing_structure()
    parts.maintenance.create_structure(missing)
    return [Repair("graph_missing", m.tenant, m.ref, _recreated(m)) for m in missing]


def _recreated(item: MissingStructure) -> str:
    if item.node is not None:
        return f"recreated {item.node.kind} node {item.node.node_id}"
    assert item.edge is not None
    return f"recreated {item.edge.kind} edge to {item.edge.dst}"


def _delete_dangling_edges(parts: OperatorParts) -> list[Repair]:
    dangling = parts.maintenance.dangling_edges()
    parts.maintenance.remove_edges(d.edge for d in dangling)
    done = [Repair("dangling_edge", d.edge.tenant, d.edge.src, f"deleted {d.edge.kind} edge to {d.edge.dst}")
            for d in dangling]
    for tenant in all_tenants(parts):  # MENTIONS/RELATED rows whose memory or entity is gone
        found = entity_doctor.dangling(parts.graph, tenant, parts.graph.memory_ids(tenant))
        entity_doctor.remove(parts.graph, found)
        done += [Repair("dangling_edge", tenant, ref, f"deleted {what}") for ref, what in found.lines()]
    return done


def _restore_orphans(parts: OperatorParts, findings: list[Finding]) -> list[Repair]:
    """Restore each orphan vector record as a memory when it can be rebuilt; else quarantine it."""
    done: list[Repair] = []
    by_tenant: dict[str, list[str]] = {}
    for f in findings:
        by_tenant.setdefault(f.tenant, []).append(str(f.ref))
    for tenant, refs in sorted(by_tenant.items()):
        records = parts.vectors.documents(tenant, refs)
        for ref in refs:
            if ref not in records:
                continue  # gone since the scan
            document, meta = records[ref]
            if parts.writer.guard.active:  # redacted under reject too: a repair is nobody's write to refuse
                document = redacted_text(document)
            item = _restorable(tenant, ref, document, meta)
            if item is not None:
                earlier = _restored_earlier(parts, tenant, ref, document)
                if earlier is not None:  # a repair killed after restoring it, before deleting the record
                    parts.vectors.delete(tenant, [ref])
                    done.append(Repair("vector_orphan", tenant, ref, f"already restored as {earlier}; deleted "
                                                                     "the leftover vector record"))
                    continue
                if _id_taken(parts, ref):  # restored under a new ref: remember the old one
                    item["metadata"] = {**(item.get("metadata") or {}), "restored_from": ref}
                try:
                    result = parts.writer.add_many([item], preferred_ids=[parse_ref(ref).id], restore=True)[0]
                except InvalidInputError as exc:  # the record's fields do not make a valid memory
                    item, reason = None, f"{exc.code}: {exc.message}"
                except MemoryCoreError as exc:  # a store failure: the record stays for the next repair
                    done.append(Repair("vector_orphan", tenant, ref, f"not restored now ({exc.code}: "
                                                                     f"{exc.message}); the record is kept"))
                    continue
                else:
                    if result.ref != ref:  # the id was taken: the restored memory has a new ref
                        parts.vectors.delete(tenant, [ref])
                    action = f"restored the memory from its vector record as {result.ref}"
                    done.append(Repair("vector_orphan", tenant, ref, action))
                    continue
            else:
                reason = "the record lacks tenant, session, agent, type, ts_us or a document"
            path = _quarantine(parts, {"tenant": tenant, "ref": ref, "document": document, "metadata": meta,
                                      "reason": reason})
            parts.vectors.delete(tenant, [ref])  # only once the quarantine file is on disk
            done.append(Repair("vector_orphan", tenant, ref, f"not restorable ({reason}); saved to {path} and "
                                                             "deleted from the vector store"))
    return done


def _id_taken(parts: OperatorParts, ref: str) -> bool:
    return parts.maintenance.id_in_use(parse_ref(ref).id)


def _restored_earlier(parts: OperatorParts, tenant: str, ref: str, document: str) -> str | None:
    """The memory an earlier (interrupted) repair restored from this record under a new ref (its
    content as restored: redacted when the record held a secret)."""
    found = parts.maintenance.restored_from(tenant, content_hash(document), ref)
    return None if found is None else memory_ref(found)


def _restorable(tenant: str, ref: str, document: str, meta: dict[str, Any]) -> AddItem | None:
    """add_memory arguments rebuilt from a vector record, or None when fields are missing."""
    try:
        kind = parse_ref(ref).kind
    except InvalidRefError:
        return None
    required = ("session", "agent", "type", "ts_us")
    if kind != MEMORY or meta.get("tenant") != tenant or not document.strip() or any(k not in meta for k in required):
        return None
    if isinstance(meta["ts_us"], bool) or not isinstance(meta["ts_us"], int):
        return None
    return {
        "tenant": tenant, "session": meta["session"], "agent": meta["agent"], "type": meta["type"],
        "content": document, "timestamp": from_us(meta["ts_us"]), "visibility": meta.get("visibility") or "tenant",
        "salience": meta.get("salience"), "role": meta.get("role"), "channel": meta.get("channel"),
        "project_id": meta.get("project_id") or None,
        "source": {"id": meta["source_id"]} if meta.get("source_id") else None,
        "metadata": {"restored_by": "doctor"},
    }


def _quarantine(parts: OperatorParts, record: dict[str, Any]) -> str:
    folder = parts.data_dir / "doctor"
    folder.mkdir(exist_ok=True)
    path = folder / f"quarantine-{time.strftime('%Y%m%dT%H%M%S')}.jsonl"
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        fh.flush()
        os.fsync(fh.fileno())  # the record is deleted from Chroma next: this copy must be durable first
    dir_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return str(path)


def _reembed(parts: OperatorParts, findings: Iterable[Finding]) -> list[Repair]:
    """Re-embed memories from SQLite and upsert their vector records."""
    by_tenant: dict[str, dict[int, str]] = {}
    for f in findings:
        by_tenant.setdefault(f.tenant, {})[parse_ref(f.ref).id] = f.kind
    done: list[Repair] = []
    for tenant, kinds in sorted(by_tenant.items()):
        rows = memory_rows(parts, tenant, list(kinds))
        for start in range(0, len(rows), EMBED_BATCH):
            chunk = rows[start : start + EMBED_BATCH]
            records = [MemoryRecord.from_row(r) for r in chunk]
            vectors = parts.embedder.embed([embedding_text(r) for r in records])
            refs = [f"{MEMORY}:{r['id']}" for r in chunk]
            # upsert merges metadata in Chroma: drop stale records first so no stray key survives
            parts.vectors.delete(tenant, [ref for r, ref in zip(chunk, refs, strict=True)
                                         if kinds[r["id"]] == "vector_stale"])
            parts.vectors.upsert(tenant, refs, vectors, [r["content"] for r in chunk],
                                [vector_metadata(r.node) for r in records])
            done += [Repair(kinds[r["id"]], tenant, ref, "re-embedded the content from SQLite into the vector store")
                     for r, ref in zip(chunk, refs, strict=True)]
    return done


def _rebuild_lexical(parts: OperatorParts, tenant: str) -> Repair:
    """Re-index the tenant's own rows in its lexical index and window."""
    parts.maintenance.rebuild_lexical(tenant)
    return Repair("lexical", tenant, None, "rebuilt the tenant's lexical index and window from its memories")


__all__ = ["DoctorReport", "Finding", "Repair", "check_stores", "repair_stores"]
