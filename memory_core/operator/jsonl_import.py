"""Import of memory-core's own JSONL export (:mod:`memory_core.operator.export_format`) into one tenant.

What an import promises:

- **Idempotent.** A line whose memory is already there (same session, timestamp and content
  hash) is skipped, and a skipped line changes nothing: not the stored row's state, not its
  links. Rerunning a file writes nothing new.
- **Never half-written, crash-safe.** Lines are written in batches through the journaled write
  path; each row is written *with* its version state (``supersedes``, ``valid_to``, ``locked``),
  its edges to other memories and its entities, in the same graph transaction. A row is there
  whole or not at all, so an import killed at any instant and run again ends complete.
- **It touches only what it writes.** A line whose idempotency key already names another memory
  (in the store or earlier in the file) is refused (IDEMPOTENCY_CONFLICT), never answered by that
  memory; no line ends, locks or links a row the import did not write.
- **Ids it does not own stay put.** A row keeps its ref when the id is free and at most
  :data:`memory_core.refs.MAX_KEPT_ID`; otherwise it gets a fresh one (``remapped``, and the
  mapping is in ``refs``). Entity refs follow the same rule.
- **Version chains stay chains.** A line that corrects itself, a version corrected by two lines
  (a fork: the later one is refused), versions that correct each other in a cycle (every line of
  the cycle is refused) and a version corrected while its own line leaves it current are refused.
  A line pointing at a later line waits for it; a link to a memory outside the file (or to a
  refused line) is dropped.
- **Bad lines.** A line that is not UTF-8, not JSON, not a valid line or of another tenant is
  refused with a code and a message naming it. By default the import stops at the first refused
  line (the lines before it are written; fix it and run again); ``skip_bad`` imports the rest and
  lists every refused line. ``dry_run`` writes nothing and reports what would be written.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from graph.api import SUPERSEDES, GraphTxn, mem_node
from memory_core import validation as v
from memory_core.entities.transfer import EntityImportCounts, EntityRestore, ImportedMemory, guard_line_entities
from memory_core.errors import MemoryCoreError
from memory_core.importers.json_records import Decoded, line_value, lone_surrogate
from memory_core.models import to_us
from memory_core.operator.export_format import ExportLine
from memory_core.refs import memory_ref, parse_ref
from memory_core.secret_guard import Scan
from memory_core.store_errors import graph_errors
from memory_core.write.add_rows import ItemRef
from memory_core.write.rows import content_hash, scoped_idempotency_key

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

IMPORT_BATCH = 200
MAX_REPORTED_ERRORS = 50
SAMPLE_ROWS = 5
Identity = tuple[str, int, str]  # (session, timestamp µs, content hash): the same memory


@dataclass
class ImportCounts:
    """What an import did (or, with ``dry_run``, would do). ``remapped`` rows were written under a
    new ref (their id was taken or out of range); ``states``: rows written with a version state;
    ``stopped_at``: the refused line the import stopped at (None: it read the whole file)."""

    lines: int = 0
    written: int = 0
    skipped: int = 0
    remapped: int = 0
    edges: int = 0
    states: int = 0
    entities: int = 0
    mentions: int = 0
    relations: int = 0
    errors: int = 0
    error_lines: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    stopped_at: int | None = None
    dry_run: bool = False
    sample: list[dict[str, Any]] = field(default_factory=list)  # dry run: the first rows it would write
    refs: dict[str, str] = field(default_factory=dict)  # ref in the file -> ref in the store

    def error(self, line: int, code: str, message: str, field: str | None = None) -> None:
        self.errors += 1
        if len(self.error_lines) < MAX_REPORTED_ERRORS:
            self.error_lines.append({"line": line, "field": field, "code": code, "message": message})

    def note(self, line: int, message: str) -> None:
        if len(self.notes) < MAX_REPORTED_ERRORS:
            self.notes.append({"line": line, "message": message})

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in
               ("lines", "written", "skipped", "remapped", "edges", "states", "entities", "mentions", "relations",
                "errors", "error_lines", "notes", "stopped_at", "dry_run")}
        if self.dry_run:
            out["sample"] = self.sample
        return out


def import_lines(
    parts: OperatorParts,
    lines: Iterable[str | bytes],
    tenant: str,
    progress: Callable[[int], None] | None = None,
    *,
    skip_bad: bool = False,
    dry_run: bool = False,
) -> ImportCounts:
    """Import JSONL lines (text, or bytes decoded as UTF-8 line by line) into ``tenant``.

    See the module's promises. A store failure aborts the import (nothing of the failing batch is
    written); running it again resumes where it stopped.
    """
    job = _JsonlImport(parts, v.tenant(tenant), skip_bad=skip_bad, dry_run=dry_run)
    return job.run(lines, progress)


@dataclass
class _Held:
    """A line waiting for lines of the file it links to."""

    number: int
    line: ExportLine
    waiting: set[str]


class _JsonlImport:
    def __init__(self, parts: OperatorParts, tenant: str, *, skip_bad: bool, dry_run: bool) -> None:
        self.parts, self.tenant, self.skip_bad, self.dry_run = parts, tenant, skip_bad, dry_run
        self.counts = ImportCounts(dry_run=dry_run)
        self.stopped = False
        self.batch: list[tuple[int, ExportLine]] = []
        self.in_batch: set[str] = set()
        self.mapped: dict[str, str] = {}  # file ref -> stored ref (dry run: itself), once written or found
        self.written_here: set[str] = set()  # file refs this run wrote
        self.line_of: dict[str, int] = {}  # file ref -> the line accepted under it
        self.open_versions: set[str] = set()  # file refs whose own line leaves them current
        self.same_as: dict[str, str] = {}  # file ref of a repeated memory -> the ref it repeats
        self.identities: dict[Identity, str] = {}
        self.keys: dict[str, tuple[str, int]] = {}  # scoped idempotency key -> (file ref, line)
        self.corrected_by: dict[str, tuple[int, str]] = {}  # file ref -> (line, ref) of the version correcting it
        self.refused: set[str] = set()
        self.held: dict[str, _Held] = {}
        self.waiters: dict[str, set[str]] = {}
        self.ready: deque[tuple[int, ExportLine]] = deque()
        self.entities: EntityRestore | None = None
        self.dry_entities: set[str] = set()  # dry run: the entity refs counted so far

    # ---- reading --------------------------------------------------------------------------
    def run(self, lines: Iterable[str | bytes], progress: Callable[[int], None] | None) -> ImportCounts:
        for number, raw in enumerate(lines, 1):
            if progress is not None:
                progress(1)
            text = self._decode(raw, number)
            if text is None or not text.strip():
                if self.stopped:
                    break
                continue
            self.counts.lines += 1
            line = self._parse(text, number)
            if line is not None:
                self._accept(number, line)
                self._drain()
            if self.stopped:
                break
        if not self.stopped:
            self._settle_held()
        self._flush()
        self._drain()
        self.counts.refs.update({ref: self.mapped[same] for ref, same in self.same_as.items() if same in self.mapped})
        return self.counts

    def _decode(self, raw: str | bytes, number: int) -> str | None:
        if isinstance(raw, str):
            text = raw
        else:
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                self.counts.lines += 1
                self._refuse(number, "INVALID_INPUT", f"The line is not valid UTF-8 (byte 0x{raw[exc.start]:02x} "
                                                      f"at byte {exc.start + 1} of the line).")
                return None
        return text.removeprefix("\ufeff") if number == 1 else text

    def _refuse(self, number: int, code: str, message: str, ref: str | None = None, *,
                field: str | None = None) -> None:
        """Report a refused line (``field``: the field at fault, when one is); without skip_bad (and
        outside a dry run) the import stops here."""
        self.counts.error(number, code, message, field)
        if ref is not None:
            self.refused.add(ref)
            self._release(ref)
        if not self.skip_bad and not self.dry_run and self.counts.stopped_at is None:
            self.counts.stopped_at = number
            self.stopped = True

    def _parse(self, text: str, number: int) -> ExportLine | None:
        value = line_value(text)  # never raises: too deep, too many digits, not JSON are each a refusal
        if isinstance(value, Decoded):
            self._refuse(number, "INVALID_INPUT", f"{value.why}.", field=value.field)
            return None
        bad = lone_surrogate(value)
        if bad is not None:
            self._refuse(number, "INVALID_INPUT", f"'{bad or 'line'}' holds a lone surrogate (a \\ud800-\\udfff "
                                                  "escape without its pair): it is not valid Unicode.",
                         field=bad or None)
            return None
        try:
            line = ExportLine.model_validate(value)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            self._refuse(number, "INVALID_INPUT", f"'{where}': {first['msg']}.", field=where)
            return None
        if line.tenant != self.tenant:
            self._refuse(number, "TENANT_MISMATCH", f"The line belongs to tenant '{line.tenant}', not "
                                                    f"'{self.tenant}'.")
            return None
        problem = _line_problem(self.parts, line)
        if problem is not None:
            code, message, field = problem
            self._refuse(number, code, message, field=field)
            return None
        return line

    # ---- accepting and ordering -------------------------------------------------------------
    def _canon(self, ref: str) -> str:
        return self.same_as.get(ref, ref)

    def _accept(self, number: int, line: ExportLine) -> None:
        identity = (line.session, to_us(v.timestamp(line.timestamp)), line.content_hash)
        if identity in self.identities:  # the same memory twice in the file
            self.counts.skipped += 1
            if line.ref != self.identities[identity]:
                self.same_as.setdefault(line.ref, self.identities[identity])
            return
        ref = line.ref
        if ref in self.line_of or ref in self.same_as:
            self._refuse(number, "INVALID_INPUT", f"ref {ref} is already line {self.line_of.get(ref)}'s, "
                                                  "a different memory.")
            return
        if line.supersedes == ref or any(e.node == ref for e in line.memory_edges()):
            self._refuse(number, "INVALID_INPUT", f"{ref} names itself as the version it corrects (or links to "
                                                  "itself).", ref)
            return
        target = self._canon(line.supersedes) if line.supersedes is not None else None
        if target is not None and target in self.corrected_by:
            by_line, by_ref = self.corrected_by[target]
            self._refuse(number, "INVALID_INPUT", f"{target} is already corrected by {by_ref} (line {by_line}); a "
                                                  "version has one successor, so this line would fork the chain.", ref)
            return
        scoped = scoped_idempotency_key(line.idempotency_key, line.visibility, line.agent)
        if scoped is not None and self._key_conflict(number, line, scoped, identity):
            return
        self.identities[identity] = ref
        self.line_of[ref] = number
        if line.valid_to is None:
            self.open_versions.add(ref)
        if scoped is not None:
            self.keys[scoped] = (ref, number)
        if target is not None:
            self.corrected_by[target] = (number, ref)
        waiting = {d for d in map(self._canon, line.links()) if d not in self.mapped and d not in self.refused
                   and d not in self.in_batch}
        if waiting:
            self.held[ref] = _Held(number, line, waiting)
            for dep in waiting:
                self.waiters.setdefault(dep, set()).add(ref)
            return
        self.ready.append((number, line))

    def _key_conflict(self, number: int, line: ExportLine, scoped: str, identity: Identity) -> bool:
        """True (and the line refused) when its idempotency key names another memory."""
        key = line.idempotency_key
        if scoped in self.keys:
            other, other_line = self.keys[scoped]
            self._refuse(number, "IDEMPOTENCY_CONFLICT", f"Its idempotency_key {key!r} is also line {other_line}'s "
                                                         f"({other}), a different memory; it was not written.",
                         line.ref)
            return True
        with graph_errors("importing into a tenant"):
            found = self.parts.graph.by_idempotency_key(self.tenant, scoped)
        if found is not None and (found.session, found.ts_us, found.content_hash) != identity:
            self._refuse(number, "IDEMPOTENCY_CONFLICT", f"Its idempotency_key {key!r} already names "
                                                         f"{memory_ref(found.id)}, a different memory (another "
                                                         "session, time or content); it was not written.", line.ref)
            return True
        return False

    def _existing(self, line: ExportLine) -> int | None:
        """The id of the same memory already in the tenant (same session, timestamp and content: as the
        file has it, or as the secrets guard stored it, so a file holding secrets re-imports as a no-op)."""
        ts_us = to_us(v.timestamp(line.timestamp))
        found = self.parts.maintenance.existing_memory(self.tenant, line.session, line.content_hash, ts_us)
        if found is None:
            stored = content_hash(self.parts.writer.guard.text(line.content, "content", Scan()))
            if stored != line.content_hash:
                found = self.parts.maintenance.existing_memory(self.tenant, line.session, stored, ts_us)
        return found

    def _release(self, ref: str) -> None:
        """``ref`` is settled (written, found, or refused): lines waiting only for it are ready."""
        for waiter in sorted(self.waiters.pop(ref, ())):
            held = self.held.get(waiter)
            if held is None:
                continue
            held.waiting.discard(ref)
            if not held.waiting:
                del self.held[waiter]
                self.ready.append((held.number, held.line))

    def _drain(self) -> None:
        while self.ready and not self.stopped:
            number, line = self.ready.popleft()
            self._enqueue(number, line)

    def _enqueue(self, number: int, line: ExportLine) -> None:
        target = self._canon(line.supersedes) if line.supersedes is not None else None
        if target is not None and target in self.open_versions and target not in self.refused:
            self._refuse(number, "INVALID_INPUT", f"It corrects {target}, which its own line ({self.line_of[target]}) "
                                                  "leaves current (no valid_to).", line.ref)
            return
        self.batch.append((number, line))
        self.in_batch.add(line.ref)
        if len(self.batch) >= IMPORT_BATCH:
            self._flush()

    def _settle_held(self) -> None:
        """At the end of the file: links to refs the file never held are dropped; lines that wait on
        each other in a cycle are refused (and the lines waiting on them go on without the link)."""
        while True:
            self._drain()
            if self.stopped or not self.held:
                return
            for ref, held in list(self.held.items()):
                held.waiting &= set(self.held)
                if not held.waiting:
                    del self.held[ref]
                    self.ready.append((held.number, held.line))
            if self.ready:
                continue
            for cycle in _cycles({ref: held.waiting for ref, held in self.held.items()}):
                shown = " -> ".join([*cycle, cycle[0]])
                for held in [self.held.pop(ref) for ref in cycle]:
                    self._refuse(held.number, "INVALID_INPUT", f"Its version links form a cycle ({shown}); none of "
                                                               "its lines is written.", held.line.ref)

    # ---- writing ------------------------------------------------------------------------------
    def _flush(self) -> None:
        if not self.batch:
            return
        batch, self.batch, self.in_batch = self.batch, [], set()
        todo: list[tuple[int, ExportLine]] = []
        settled: list[str] = []
        for number, line in batch:
            with graph_errors("importing into a tenant"):
                found = self._existing(line)
            if found is not None:  # already there: skipped whole
                self.counts.skipped += 1
                self.mapped[line.ref] = self.counts.refs[line.ref] = memory_ref(found)
                settled.append(line.ref)
            else:
                todo.append((number, line))
        todo = [item for item in todo if self._version_link_ok(*item)]
        if todo:
            settled += self._dry(todo) if self.dry_run else self._write(todo)
        for ref in settled:
            self._release(ref)

    def _version_link_ok(self, number: int, line: ExportLine) -> bool:
        """A version correcting a stored row this run did not write: refused when that row already has a
        newer version (a fork in the store); written without the link when that row is still current
        (the import never ends a row it did not write)."""
        target = self._canon(line.supersedes) if line.supersedes is not None else None
        if target is None or target not in self.mapped or target in self.written_here or self.dry_run:
            return True
        stored = parse_ref(self.mapped[target]).id
        with graph_errors("importing into a tenant"):
            sources = self.parts.graph.superseders(self.tenant, [stored]).get(stored, [])
            newer = [m for m in self.parts.graph.memories(self.tenant, sources).values() if m.supersedes_id == stored]
            row = self.parts.graph.memory(self.tenant, stored)
        if newer:
            self._refuse(number, "SUPERSEDED", f"It corrects {target}, which is already corrected in the store; a "
                                               "version has one successor.", line.ref)
            return False
        if row is not None and row.valid_to_us is None:
            self.counts.note(number, f"{target} is already in the store and still current there; the import "
                                     "does not end rows it did not write, so this line is written without its "
                                     "link to it.")
            line.supersedes = None
            line.edges = [e for e in line.edges if self._canon(e.node) != target]
        return True

    def _links(self, line: ExportLine, batch: dict[str, int]) -> tuple[list[tuple[str | ItemRef, str]], dict[str, Any]]:
        """Its edges to other memories and its version state: by the stored ref of a memory written or
        found before, by position for one written in the same batch (``batch``: file ref -> position);
        a link to anything else (outside the file, refused) is dropped."""
        def node(ref: str) -> str | ItemRef | None:
            ref = self._canon(ref)
            if ref in batch:
                return ItemRef(batch[ref])
            return mem_node(parse_ref(self.mapped[ref]).id) if ref in self.mapped else None

        edges: list[tuple[str | ItemRef, str]] = []
        for edge in line.memory_edges():
            target = node(edge.node)
            if target is not None and (target, edge.kind) not in edges:
                edges.append((target, edge.kind))
        state: dict[str, Any] = {}
        version = node(line.supersedes) if line.supersedes is not None else None
        if version is not None:
            state["supersedes_id"] = version if isinstance(version, ItemRef) else parse_ref(version).id
            if (version, SUPERSEDES) not in edges:  # a version holds its SUPERSEDES edge (as update_memory writes)
                edges.append((version, SUPERSEDES))
        if line.valid_to is not None:
            state["valid_to_us"] = to_us(v.timestamp(line.valid_to))
        if line.locked:
            state["locked"] = True
        if line.ended is not None and line.valid_to is not None:  # an end is its reason with its valid_to
            state["end_reason"] = str(line.ended.get("reason") or "ended")[:500]
            state["ended_by"] = line.ended.get("by")
        if line.archived is not None:
            state["archived_us"] = to_us(v.timestamp(line.archived))
        return edges, state

    def _dry(self, todo: list[tuple[int, ExportLine]]) -> list[str]:
        seen = self.dry_entities
        positions = {line.ref: i for i, (_n, line) in enumerate(todo)}
        for number, line in todo:
            edges, state = self._links(line, positions)
            self.mapped[line.ref] = line.ref
            self.written_here.add(line.ref)
            self.counts.written += 1
            self.counts.edges += len(edges)
            self.counts.states += bool(state)
            self.counts.entities += sum(1 for e in line.entities if e.ref not in seen)
            seen |= {e.ref for e in line.entities}
            self.counts.mentions += len(line.entities)
            self.counts.relations += len(line.relations)
            if len(self.counts.sample) < SAMPLE_ROWS:
                self.counts.sample.append({"line": number, "ref": line.ref, "session": line.session,
                                           "type": line.type, "content": line.content[:200]})
        return [line.ref for _n, line in todo]

    def _write(self, todo: list[tuple[int, ExportLine]]) -> list[str]:
        if self.entities is None:
            self.entities = EntityRestore({})
        restore = self.entities
        positions = {line.ref: i for i, (_n, line) in enumerate(todo)}
        links = [self._links(line, positions) for _n, line in todo]
        outcome: dict[str, Any] = {}

        def linked(tx: GraphTxn, written: list[tuple[int, int]]) -> None:
            attempt = restore.attempt()  # may run again (a retried transaction): start from what committed
            outcome["counts"] = attempt.write(tx, self.tenant, [
                ImportedMemory(mem_id, line.agent, line.visibility == "tenant", line.entities, line.relations)
                for pos, mem_id in written if (line := todo[pos][1]).entities or line.relations])
            outcome["entities"] = attempt

        results = self.parts.writer.add_many(
            [line.add_item() for _n, line in todo], preferred_ids=[parse_ref(line.ref).id for _n, line in todo],
            edges=[e for e, _s in links], states=[s for _e, s in links], linked=linked, extract=False)
        if "entities" in outcome:
            restore.keep(outcome["entities"])
            done: EntityImportCounts = outcome["counts"]
            self.counts.entities += done.entities
            self.counts.mentions += done.mentions
            self.counts.relations += done.relations
        settled = []
        for (number, line), (edges, state), result in zip(todo, links, results, strict=True):
            if not result.created:  # another writer took its idempotency key between the check and the write
                self._refuse(number, "IDEMPOTENCY_CONFLICT", f"Its idempotency_key {line.idempotency_key!r} already "
                                                             f"names {result.ref}, a different memory; it was not "
                                                             "written.", line.ref)
                continue
            assert result.ref is not None  # imports are not screened by write-time hygiene: a created row has a ref
            self.mapped[line.ref] = self.counts.refs[line.ref] = result.ref
            self.written_here.add(line.ref)
            self.counts.written += 1
            self.counts.remapped += result.ref != line.ref
            self.counts.edges += len(edges)
            self.counts.states += bool(state)
            settled.append(line.ref)
        return settled


def _line_problem(parts: OperatorParts, line: ExportLine) -> tuple[str, str, str | None] | None:
    """(code, message, field) when the line cannot be written as a memory, else None."""
    if line.valid_to is not None:
        try:
            v.timestamp(line.valid_to)
        except MemoryCoreError:
            return "INVALID_INPUT", "'valid_to' must be an ISO-8601 timestamp with a timezone.", "valid_to"
    if content_hash(line.content) != line.content_hash:
        return "INVALID_INPUT", "The content does not match its content_hash.", "content_hash"
    try:
        parts.writer.prepare(line.add_item(), extract=False)
        line.entities, line.relations = guard_line_entities(line.entities, line.relations, parts.writer.guard)
        for entity in line.entities:
            entity.check()
    except MemoryCoreError as exc:
        name = exc.fields.get("field")
        return exc.code, exc.message, str(name) if name else None
    return None


def _cycles(waits: dict[str, set[str]]) -> list[list[str]]:
    """The cycles among lines waiting on each other (each line in at most one; every remaining line
    waits on another one, so following any line's first wait ends in a cycle)."""
    out: list[list[str]] = []
    placed: set[str] = set()
    for start in sorted(waits):
        path: list[str] = []
        index: dict[str, int] = {}
        node: str | None = start
        while node is not None and node not in index and node not in placed:
            index[node] = len(path)
            path.append(node)
            node = min(waits[node]) if waits.get(node) else None
        if node is not None and node in index:
            cycle = path[index[node]:]
            out.append(cycle)
            placed |= set(cycle)
        placed |= set(path)
    return out
