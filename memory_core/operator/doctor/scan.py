"""Read-only scans behind :mod:`memory_core.operator.doctor.run`: per tenant, which memories each store holds.

The graph store's own checks (its lexical index term by term against the stored content,
its lexical window, missing derived nodes and edges, dangling edges) come from
``parts.maintenance`` (:class:`graph.maintenance_api.GraphMaintenance`); this module turns
what they report, and what the vector store holds, into :class:`Finding` values.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from graph.api import EntityRecord, EntityRelation, MemoryRecord
from graph.maintenance_api import DanglingEdge, MissingStructure
from memory_core.entities import doctor as entity_doctor
from memory_core.operator.doctor import versions
from memory_core.operator.doctor.secrets import describe, memory_secrets, name_secrets
from memory_core.operator.doctor.versions import VersionFix
from memory_core.refs import EPISODE, MAX_ID, MEMORY, episode_ref, memory_ref
from memory_core.secret_guard import detect
from memory_core.secret_guard.detect import looks_like_token
from memory_core.write.rows import vector_metadata

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

CHUNK = 500


@dataclass(frozen=True)
class Finding:
    """One disagreement: its kind (see :mod:`memory_core.operator.doctor.run`), tenant, ref and a sentence."""

    kind: str
    tenant: str
    ref: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class StoreCounts:
    """How many memories of one tenant each store holds: they agree when the stores do."""

    tenant: str
    rows: int  # the graph's memory rows (whatever its backend)
    counted: int  # the count the graph keeps beside them
    vectors: int  # Chroma's memory records
    lexical: int  # rows the lexical index holds

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def all_tenants(parts: OperatorParts) -> list[str]:
    """Every tenant any store knows (a leak into one store still shows up)."""
    names = set(parts.maintenance.tenants_present())
    names |= set(parts.graph.tenants())
    return sorted(names | set(parts.vectors.tenants()))


def memory_rows(parts: OperatorParts, tenant: str, ids: list[int] | None = None) -> list[dict[str, Any]]:
    """Stored rows of the tenant (all, or those among ``ids``), as write-path row dicts."""
    return [m.as_row() for m in parts.maintenance.memory_rows(tenant, ids)]


def scan(parts: OperatorParts) -> tuple[list[StoreCounts], list[Finding]]:
    """Counts per tenant and every disagreement between the stores (callers hold the writer lock)."""
    findings: list[Finding] = []
    journal = parts.maintenance.journal()
    pending = {(e.tenant, e.item_id) for e in journal}
    findings += [Finding("journal_pending", e.tenant, e.item_id,
                         f"an interrupted {e.op} (journaled at {e.created_us} µs)") for e in journal]
    findings += id_findings(parts)
    counts = []
    stale = parts.maintenance.stale_counts()
    for tenant in all_tenants(parts):
        rows = {r["id"]: r for r in memory_rows(parts, tenant)}
        counted = parts.graph.count(tenant)
        if tenant in stale:
            shown = "; ".join(stale[tenant][:3]) + (f"; and {len(stale[tenant]) - 3} more" if len(stale[tenant]) > 3
                                                    else "")
            findings.append(Finding("graph_stale", tenant, None, f"the graph's counts disagree with its rows: {shown}"))
        vector_ids = parts.vectors.all_ids(tenant)
        findings += _vector_findings(parts, tenant, rows, vector_ids, pending)
        indexed, lexical = _lexical_findings(parts, tenant, set(rows))
        findings += lexical + _window_findings(parts, tenant)
        findings += [f for f, _fix in version_findings(parts, tenant, rows)]
        findings += [Finding("dangling_edge", tenant, ref, f"{what}: the memory or entity is gone")
                     for ref, what in entity_doctor.dangling(parts.graph, tenant, rows).lines()]
        if parts.writer.guard.active:  # under security.secrets = "allow" stored secrets are the operator's choice
            findings += secret_findings(parts, tenant, rows)
        memory_vectors = sum(1 for ref in vector_ids if ref.startswith(MEMORY + ":"))
        counts.append(StoreCounts(tenant, len(rows), counted, memory_vectors, indexed))
    findings += [Finding("graph_missing", m.tenant, m.ref, missing_detail(m))
                 for m in parts.maintenance.missing_structure()]
    findings += [Finding("dangling_edge", d.edge.tenant, d.edge.src, f"{d.edge.kind} -> {d.edge.dst}: "
                         f"{dangling_reason(d)}") for d in parts.maintenance.dangling_edges()]
    return counts, findings


def version_findings(parts: OperatorParts, tenant: str, rows: dict[int, dict[str, Any]]
                     ) -> list[tuple[Finding, VersionFix]]:
    """Broken version chains of the tenant (see :mod:`memory_core.operator.doctor.versions`), each with its fix."""
    return [(Finding(f.kind, f.tenant, f.ref, f.detail), fix)
            for f, fix in versions.version_findings(parts, tenant, rows)]


def id_findings(parts: OperatorParts) -> list[Finding]:
    """The shared id sequence and rows past the largest id a ref can name (imports used to put them there)."""
    space = parts.maintenance.id_space(MAX_ID)
    out = []
    if space.next_id > MAX_ID:
        out.append(Finding("id_sequence", "", None, f"the id sequence hands out {space.next_id} next, past the "
                           f"largest id a ref can name ({MAX_ID}): no ref could reach a new memory"))
    prefix = {"memory": "mem", "episode": "ep", "entity": "ent"}
    out += [Finding("id_unnameable", tenant, f"{prefix[kind]}:{item}", f"this {kind}'s id is past the nameable "
                    "range: no ref reaches it and export refuses it (doctor does not renumber rows)")
            for kind, tenant, item in space.beyond]
    return out


def secret_relations(parts: OperatorParts, tenant: str) -> dict[int, list[EntityRelation]]:
    """The tenant's relations whose label holds a secret, by the memory that declared them."""
    out: dict[int, list[EntityRelation]] = {}
    for rel in parts.graph.all_relations(tenant):
        if detect(rel.label):
            out.setdefault(rel.mem_id, []).append(rel)
    return out


def secret_findings(parts: OperatorParts, tenant: str, rows: dict[int, dict[str, Any]]) -> list[Finding]:
    """Memories and session summaries holding secrets in clear (stored before the guard existed, or
    under ``allow``) — in the content, metadata, source, the labels of the relations a memory
    declared, or the names that address it —, episodes whose vector record still does (a repair
    interrupted after the graph), and entities whose name, an alias or kind is a secret or that the
    extractor named after one: one ``secret_stored`` finding each, naming fields and kinds, never a
    value."""
    out = []
    values: dict[int, list[str]] = {}  # memory id -> the secrets in its content
    labels = secret_relations(parts, tenant)
    for mem_id, row in sorted(rows.items()):
        scan, _changes = memory_secrets(row, [r.label for r in labels.get(mem_id, [])])
        names = name_secrets(row)
        problems = [f"secrets stored in clear ({describe(scan)})"] if scan.found else []
        if names.found:
            problems.append(f"names that address it hold secrets ({describe(names)}); they are not rewritten by a "
                         "repair (a renamed session is another session): export the tenant, rename them in the "
                         "file, import it into a fresh store")
        if problems:
            out.append(Finding("secret_stored", tenant, memory_ref(mem_id), "; ".join(problems)))
            values[mem_id] = [row["content"][x.start:x.end] for x in scan.found if x.field == "content"]
    episodes = parts.graph.episodes(tenant)
    records = parts.vectors.documents(tenant, [episode_ref(e.id) for e in episodes]) if episodes else {}
    for e in episodes:
        ref = episode_ref(e.id)
        where = (["its summary"] if detect(e.summary) else []) + (
            ["its vector record"] if ref in records and detect(records[ref][0]) else [])
        if where:
            out.append(Finding("secret_stored", tenant, ref, f"secrets stored in clear in {' and '.join(where)}"))
    # entities: every name, alias and kind is scanned; and a bare key the extractor took from a text has
    # no context to be recognised by, so it is matched against the secrets of the memories that mention
    # it, and an entity nothing mentions any more (its memory was lost) is judged by its shape
    mentioned: dict[int, set[str]] = {}
    for mem_id, entity_ids in parts.graph.memory_entities(tenant, list(values)).items():
        for entity_id in entity_ids:
            mentioned.setdefault(entity_id, set()).update(values.get(mem_id, []))
    entities = parts.graph.entity_records(tenant)
    unmentioned = {r.id for r in entities} - {e for _m, e in parts.graph.all_mentions(tenant)}
    out += [Finding("secret_stored", tenant, f"ent:{record.id}", "an entity named after a secret")
            for record in entities if entity_holds_secret(record, mentioned.get(record.id, set()),
                                                         unmentioned=record.id in unmentioned)]
    return out


def entity_holds_secret(record: EntityRecord, secrets: set[str], *, unmentioned: bool) -> bool:
    """Whether an entity's name, an alias or its kind is a secret (or holds one of ``secrets``, those of
    the memories that mention it; or, when nothing mentions it, is shaped like a token)."""
    names = (record.name, *record.aliases)
    return (any(detect(n) for n in names) or bool(record.kind and detect(record.kind))
            or any(len(n) >= 8 and (n in v or v in n) for n in names for v in secrets)
            or (unmentioned and any(looks_like_token(n) for n in names)))


def missing_detail(item: MissingStructure) -> str:
    if item.node is not None:
        return f"its {item.node.kind} node {item.node.node_id} is missing"
    assert item.edge is not None
    return f"its {item.edge.kind} edge to {item.edge.dst} is missing"


def dangling_reason(item: DanglingEdge) -> str:
    return f"{item.end} belongs to another tenant" if item.foreign else f"{item.end} does not exist"


def _vector_findings(
    parts: OperatorParts, tenant: str, rows: dict[int, dict[str, Any]], vector_ids: set[str],
    pending: set[tuple[str, str]],
) -> list[Finding]:
    out = []
    episodes = _episode_refs(parts, tenant)
    archived = {memory_ref(i) for i, r in rows.items() if r.get("archived_us") is not None}
    expected = {memory_ref(i) for i in rows} - archived  # retention took archived rows out of the vector index
    for ref in sorted(vector_ids & archived):
        out.append(Finding("vector_archived", tenant, ref, "an archived memory is still in the vector index"))
    for ref in sorted(vector_ids - expected - episodes - archived):
        if (tenant, ref) not in pending:
            out.append(Finding("vector_orphan", tenant, ref, "a vector record with no memory in the graph"))
    for ref in sorted(expected - vector_ids):
        if (tenant, ref) not in pending:
            out.append(Finding("vector_missing", tenant, ref, "a memory with no vector record"))
    both = sorted(expected & vector_ids)
    for start in range(0, len(both), CHUNK):
        records = parts.vectors.documents(tenant, both[start : start + CHUNK])
        for ref, (document, meta) in records.items():
            row = rows[int(ref.split(":", 1)[1])]
            want = vector_metadata(MemoryRecord.from_row(row).node)
            salience_ok = abs(float(meta.get("salience", -1)) - float(want["salience"])) < 1e-4
            differs = sorted(k for k in {*want, "role", "channel", "source_id"} - {"salience"}
                             if meta.get(k) != want.get(k))
            if document != row["content"]:
                out.append(Finding("vector_stale", tenant, ref, "the vector record's document differs"))
            elif differs or not salience_ok:
                what = ", ".join(differs + ([] if salience_ok else ["salience"]))
                out.append(Finding("vector_stale", tenant, ref, f"the vector record's metadata differs ({what})"))
    return out


def _episode_refs(parts: OperatorParts, tenant: str) -> set[str]:
    return {f"{EPISODE}:{i}" for i in parts.maintenance.episode_ids(tenant)}


def _lexical_findings(parts: OperatorParts, tenant: str, memory_ids: set[int]) -> tuple[int, list[Finding]]:
    """(documents indexed, findings) for the tenant's lexical index against the stored content."""
    state = parts.maintenance.lexical_state(tenant)
    if state.index == "missing":
        return 0, [Finding("lexical_missing", tenant, memory_ref(i), "the tenant has no lexical index")
                   for i in sorted(memory_ids)]
    if state.index == "foreign":
        return 0, [Finding("lexical_stale", tenant, None, f"the lexical index {state.name} is not the tenant's")]
    indexed = state.indexed
    out = [Finding("lexical_stale", tenant, memory_ref(i), "an indexed row with no memory of this tenant")
           for i in sorted(indexed - memory_ids)]
    out += [Finding("lexical_missing", tenant, memory_ref(i), "a memory missing from the lexical index")
            for i in sorted(memory_ids - indexed)]
    out += [Finding("lexical_stale", tenant, memory_ref(i), "indexed text differs from the stored content")
            for i in sorted(state.differing & indexed & memory_ids)]
    return len(indexed), out


def _window_findings(parts: OperatorParts, tenant: str) -> list[Finding]:
    """The tenant's lexical window against its exact expected content."""
    state = parts.maintenance.window_state(tenant)
    if not state.present:
        return [Finding("lexical_missing", tenant, None, "the tenant has no lexical window table")] if (
            state.missing) else []
    if state.damaged is not None:
        return [Finding("lexical_stale", tenant, None, f"the lexical window index is damaged ({state.damaged})")]
    out = [Finding("lexical_stale", tenant, memory_ref(i), "a window row with no memory of this tenant")
           for i in sorted(state.extra)]
    out += [Finding("lexical_missing", tenant, memory_ref(i), "a memory missing from the lexical window")
            for i in sorted(state.missing)]
    out += [Finding("lexical_stale", tenant, memory_ref(i), "window text differs from the stored content")
            for i in sorted(state.differing)]
    return out
