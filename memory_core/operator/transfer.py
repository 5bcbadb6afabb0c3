"""Export and import of one tenant as JSONL: one memory per line, everything needed to rebuild it.

An export reads one tenant only (the tenant is validated first; every row comes from
the tenant-scoped graph reads), oldest first, private memories included: it is an
operator's backup, not an agent's view. Each line is an :class:`ExportLine`.

An import writes into one named tenant and refuses lines of any other. It is idempotent:
a line whose memory is already there (same session, timestamp and content hash) is
skipped, and rows keep their refs when the id is free, so re-importing a file writes
nothing new. Edges between memories beyond the derived ones (AUTHORED_BY, IN_SESSION,
which every add writes) are restored once every row is in, and so are the entities each line
carries (see :mod:`memory_core.entities.transfer`; imports do not run the extractor).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from graph.api import AUTHORED_BY, IN_SESSION
from memory_core import validation as v
from memory_core.entities import transfer as entity_transfer
from memory_core.entities.transfer import EntityExporter, ExportEntity, ExportRelation
from memory_core.errors import MemoryCoreError
from memory_core.models import to_us
from memory_core.reads import row_from_attrs
from memory_core.refs import MEMORY, memory_ref, parse_ref
from memory_core.store_errors import graph_errors
from memory_core.write.rows import content_hash, public_idempotency_key

if TYPE_CHECKING:
    from memory_core.service import MemoryCore

EXPORT_CHUNK = 200
IMPORT_BATCH = 200
DERIVED_EDGES = frozenset({AUTHORED_BY, IN_SESSION})
MAX_REPORTED_ERRORS = 50
STATE_FIELDS = ("supersedes", "superseded", "valid_to", "locked")


class ExportEdge(BaseModel):
    """An edge leaving the memory: its kind and the node it points to."""

    model_config = ConfigDict(extra="forbid")
    kind: str
    node: str


class ExportLine(BaseModel):
    """One memory in an export file (the JSONL line format, version 1)."""

    model_config = ConfigDict(extra="forbid")
    ref: str = Field(pattern=r"^mem:[1-9][0-9]{0,17}$")
    tenant: str
    session: str
    agent: str
    type: str
    role: str | None = None
    channel: str | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    project_id: str | None = None
    salience: float
    visibility: str = "tenant"
    timestamp: str
    metadata: dict[str, Any] = Field(default_factory=dict)
    content: str
    idempotency_key: str | None = None
    content_hash: str
    edges: list[ExportEdge] = Field(default_factory=list)
    entities: list[ExportEntity] = Field(default_factory=list)  # the entities it mentions
    relations: list[ExportRelation] = Field(default_factory=list)  # the RELATED edges it declared
    # versions and locks (update_memory, lock_memory): restored once every row is in
    supersedes: str | None = Field(default=None, pattern=r"^mem:[1-9][0-9]{0,17}$")
    superseded: bool = False  # derived from valid_to (kept so a line reads as recall shows it)
    valid_to: str | None = None
    locked: bool = False

    def add_item(self) -> dict[str, Any]:
        """The add_memory arguments that rebuild this memory (its state and entities are restored after)."""
        return self.model_dump(exclude={"ref", "content_hash", "edges", "entities", "relations", *STATE_FIELDS})

    def has_state(self) -> bool:
        return self.supersedes is not None or self.valid_to is not None or self.locked


@dataclass
class ImportCounts:
    """What an import did. ``remapped`` rows were written under a new ref (their id was taken)."""

    lines: int = 0
    written: int = 0
    skipped: int = 0
    remapped: int = 0
    edges: int = 0
    states: int = 0  # rows whose version or lock state was (re)set
    entities: int = 0
    mentions: int = 0
    relations: int = 0
    errors: int = 0
    error_lines: list[dict[str, Any]] = field(default_factory=list)
    refs: dict[str, str] = field(default_factory=dict)  # ref in the file -> ref in the store

    def error(self, line: int, code: str, message: str) -> None:
        self.errors += 1
        if len(self.error_lines) < MAX_REPORTED_ERRORS:
            self.error_lines.append({"line": line, "code": code, "message": message})

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in
                ("lines", "written", "skipped", "remapped", "edges", "states", "entities", "mentions", "relations",
                 "errors", "error_lines")}


def export_count(core: MemoryCore, tenant: str) -> int:
    """How many memories an export of ``tenant`` will hold (for progress bars)."""
    return core.graph.count(v.tenant(tenant))


def export_tenant(core: MemoryCore, tenant: str) -> Iterator[dict[str, Any]]:
    """Yield the tenant's memories as JSON-able :class:`ExportLine` dicts, oldest first."""
    tenant = v.tenant(tenant)
    keys = list(core.graph.iter_newest(tenant, None))
    keys.reverse()
    with graph_errors("exporting a tenant"):
        entities = EntityExporter.of(core.graph, tenant)
    for start in range(0, len(keys), EXPORT_CHUNK):
        chunk = [mem_id for _ts, mem_id in keys[start : start + EXPORT_CHUNK]]
        with graph_errors("exporting a tenant"):
            lines = _export_chunk(core, tenant, chunk, entities)
        yield from lines


def _export_chunk(core: MemoryCore, tenant: str, ids: list[int], entities: EntityExporter) -> list[dict[str, Any]]:
    graph = core.graph
    found = graph.memories(tenant, ids)
    about = entities.fields(graph, tenant, ids, found)
    attrs = {i: found[i] for i in ids if i in found}
    contents = graph.contents(tenant, attrs)
    keys = core.maintenance.idempotency_keys(tenant, attrs)
    out = []
    for mem_id, a in attrs.items():
        if mem_id not in contents:
            continue
        row = row_from_attrs(a, contents[mem_id]).to_dict()
        edges = [ExportEdge(kind=e.kind, node=e.other) for e in graph.edges_of(tenant, memory_ref(mem_id))
                 if e.direction == "out"]
        key = public_idempotency_key(keys.get(mem_id))
        line = ExportLine(**row, idempotency_key=key, content_hash=a.content_hash, edges=edges,
                          **about.get(mem_id, {}))
        out.append(line.model_dump(mode="json", by_alias=True))
    return out


def import_lines(
    core: MemoryCore,
    lines: Iterable[str],
    tenant: str,
    progress: Callable[[int], None] | None = None,
) -> ImportCounts:
    """Import JSONL lines into ``tenant``; bad lines are counted and reported, never half-written.

    Rows are written in batches through the write path (all-or-nothing per batch); a
    store failure aborts the import, and running it again resumes where it stopped.
    """
    tenant = v.tenant(tenant)
    counts = ImportCounts()
    batch: list[ExportLine] = []
    seen: set[tuple[str, int, str]] = set()
    edges: list[tuple[str, ExportEdge]] = []
    states: list[ExportLine] = []
    about: list[tuple[str, list[ExportEntity], list[ExportRelation]]] = []
    for number, text in enumerate(lines, 1):
        if progress is not None:
            progress(1)
        if not text.strip():
            continue
        counts.lines += 1
        line = _parse(core, text, number, tenant, counts)
        if line is not None:
            identity = (line.session, to_us(v.timestamp(line.timestamp)), line.content_hash)
            if identity in seen:
                counts.skipped += 1
            else:
                seen.add(identity)
                batch.append(line)
                edges.extend((line.ref, e) for e in line.edges if e.kind not in DERIVED_EDGES)
                if line.has_state():
                    states.append(line)
                if line.entities or line.relations:
                    about.append((line.ref, line.entities, line.relations))
        if len(batch) >= IMPORT_BATCH:
            _write_batch(core, tenant, batch, counts)
            batch = []
    if batch:
        _write_batch(core, tenant, batch, counts)
    counts.edges = _restore_edges(core, tenant, edges, counts.refs)
    counts.states = _restore_states(core, tenant, states, counts.refs)
    with graph_errors("importing entities"):
        restored = entity_transfer.restore(core, tenant, about, counts.refs)
    counts.entities, counts.mentions, counts.relations = restored.entities, restored.mentions, restored.relations
    return counts


def _parse(core: MemoryCore, text: str, number: int, tenant: str, counts: ImportCounts) -> ExportLine | None:
    try:
        line = ExportLine.model_validate(json.loads(text))
    except json.JSONDecodeError as exc:
        counts.error(number, "INVALID_INPUT", f"Not JSON: {exc.msg}.")
        return None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "line"
        counts.error(number, "INVALID_INPUT", f"'{where}': {first['msg']}.")
        return None
    if line.tenant != tenant:
        counts.error(number, "TENANT_MISMATCH", f"The line belongs to tenant '{line.tenant}', not '{tenant}'.")
        return None
    if line.valid_to is not None:
        try:
            v.timestamp(line.valid_to)
        except MemoryCoreError:
            counts.error(number, "INVALID_INPUT", "'valid_to' must be an ISO-8601 timestamp with a timezone.")
            return None
    if content_hash(line.content) != line.content_hash:
        counts.error(number, "INVALID_INPUT", "The content does not match its content_hash.")
        return None
    try:
        core.writer.prepare(line.add_item(), extract=False)
        for entity in line.entities:
            entity.check()
    except MemoryCoreError as exc:
        counts.error(number, exc.code, exc.message)
        return None
    return line


def _existing(core: MemoryCore, tenant: str, line: ExportLine) -> str | None:
    """The ref of the same memory already in the tenant (same session, timestamp and content)."""
    found = core.maintenance.existing_memory(tenant, line.session, line.content_hash,
                                             to_us(v.timestamp(line.timestamp)))
    return None if found is None else memory_ref(found)


def _write_batch(core: MemoryCore, tenant: str, batch: list[ExportLine], counts: ImportCounts) -> None:
    todo: list[ExportLine] = []
    for line in batch:
        with graph_errors("importing into a tenant"):
            found = _existing(core, tenant, line)
        if found is not None:
            counts.skipped += 1
            counts.refs[line.ref] = found
        else:
            todo.append(line)
    if not todo:
        return
    results = core.writer.add_many(
        [line.add_item() for line in todo], preferred_ids=[parse_ref(line.ref).id for line in todo], extract=False
    )
    for line, result in zip(todo, results, strict=True):
        counts.refs[line.ref] = result.ref
        if not result.created:
            counts.skipped += 1
            continue
        counts.written += 1
        counts.remapped += result.ref != line.ref


def _restore_edges(core: MemoryCore, tenant: str, edges: list[tuple[str, ExportEdge]], refs: dict[str, str]) -> int:
    """Write memory-to-memory edges whose ends were both imported (refs mapped to the store's)."""
    wanted = []
    for src, edge in edges:
        dst = edge.node
        if not dst.startswith(MEMORY + ":") or src not in refs or dst not in refs:
            continue
        wanted.append((refs[src], refs[dst], edge.kind))
    if not wanted:
        return 0
    with core.writer.lock, core.graph.transaction() as tx:
        for src, dst, kind in wanted:
            tx.write_edge(tenant, src, dst, kind)
    return len(wanted)


def _restore_states(core: MemoryCore, tenant: str, lines: list[ExportLine], refs: dict[str, str]) -> int:
    """Set each imported row's version chain link, validity end and lock as its line has them.

    Only rows whose state differs are written (a re-import writes nothing), in one transaction
    after every row and edge is in; an import stopped before it leaves rows current and
    unlocked, and running it again sets them. A ``supersedes`` outside the file is dropped.
    """
    wanted: dict[int, dict[str, Any]] = {}
    for line in lines:
        if line.ref not in refs:
            continue
        sup = refs.get(line.supersedes) if line.supersedes is not None else None
        wanted[parse_ref(refs[line.ref]).id] = {
            "supersedes_id": parse_ref(sup).id if sup is not None else None,
            "valid_to_us": to_us(v.timestamp(line.valid_to)) if line.valid_to is not None else None,
            "locked": line.locked,
        }
    if not wanted:
        return 0
    with core.writer.lock, graph_errors("importing into a tenant"):
        found = core.graph.memories(tenant, wanted)
        changed = {i: state for i, state in wanted.items() if i in found and state != {
            "supersedes_id": found[i].supersedes_id, "valid_to_us": found[i].valid_to_us, "locked": found[i].locked}}
        if changed:
            with core.graph.transaction() as tx:
                for mem_id, state in changed.items():
                    tx.set_memory_state(tenant, mem_id, state)
    return len(changed)
