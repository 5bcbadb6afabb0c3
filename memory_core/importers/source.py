"""What a source becomes, and how it is written: the part every ``--from`` format shares.

A reader (one module per format) turns a file or folder into :class:`SourceItem` values — one
memory each, with the entities and relations it declares and an idempotency key derived from the
source — and :class:`Problem` values for what it cannot read, both in source order.
:func:`write_source` validates every item as an add would, then writes them in batches through
the journaled write path (each batch all-or-nothing, entities and relations in the same graph
transaction as their memory):

- **Idempotent**: an item whose key is already in the tenant is answered by the memory it
  wrote before, so a rerun (or the run after a kill) adds nothing and finishes what is missing.
- **Bad input** (a :class:`Problem`, or an item an add would refuse) is named by file, line and
  field. By default the import stops there (the items before it are written); ``skip_bad``
  writes every good item and lists the rest. ``dry_run`` writes nothing and reports what would
  be written, per kind, with the first rows.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.api import entity_norm
from memory_core import validation as v
from memory_core.entities.declared import KIND_PATTERN
from memory_core.errors import MemoryCoreError
from memory_core.store_errors import graph_errors
from memory_core.write.rows import scoped_idempotency_key

if TYPE_CHECKING:
    from memory_core.service import MemoryCore

WRITE_BATCH = 200
MAX_REPORTED = 50
SAMPLE_ROWS = 5
RESERVED_TYPES = frozenset({"turn", "handoff", "episode"})  # a source's categories never become these


@dataclass(frozen=True)
class Where:
    """Where in the source something came from: the file (as given, or relative to the folder),
    its 1-based line, and the field of the source's own format when one is at fault."""

    file: str
    line: int | None = None
    field: str | None = None

    def at(self, name: str) -> Where:
        return Where(self.file, self.line, name)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "field": self.field}

    def __str__(self) -> str:
        place = self.file if self.line is None else f"{self.file}:{self.line}"
        return place if self.field is None else f"{place} ({self.field})"


@dataclass
class SourceItem:
    """One memory a source becomes. ``kind`` says what it was in the source (observation, relation,
    paragraph, …: the report counts by it); ``key`` is its idempotency key, derived from the source
    so the same item always gets the same one; ``agent`` None means the import's agent."""

    kind: str
    where: Where
    content: str
    session: str
    timestamp: datetime
    key: str
    type: str = "note"
    agent: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)

    def add_item(self, tenant: str, agent: str) -> dict[str, Any]:
        """The add_memory arguments of this item."""
        return {"tenant": tenant, "session": self.session, "agent": self.agent or agent, "content": self.content,
                "type": self.type, "timestamp": self.timestamp, "idempotency_key": self.key,
                "metadata": self.metadata, "entities": self.entities or None, "relations": self.relations or None}


@dataclass(frozen=True)
class Problem:
    """Something of the source that cannot be imported, with a stable code and a sentence."""

    where: Where
    message: str
    code: str = "INVALID_INPUT"

    def to_dict(self) -> dict[str, Any]:
        return {**self.where.to_dict(), "code": self.code, "message": self.message}


@dataclass(frozen=True)
class Note:
    """Something the user may want to know that is not an error (a merged entity, a skipped empty line)."""

    where: Where
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.where.to_dict(), "message": self.message}


Read = Iterable[SourceItem | Problem | Note]


@dataclass
class SourceReport:
    """What an import from another tool did (or, with ``dry_run``, would do)."""

    source: str
    path: str
    tenant: str
    agent: str
    dry_run: bool = False
    items: int = 0  # memories the source holds (good and bad)
    written: int = 0
    skipped: int = 0  # already present (their key was in the tenant): nothing written
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> {read, written, skipped}
    entities: int = 0  # distinct entities the source declares (names compared as memory-core does)
    relations: int = 0
    sessions: int = 0
    errors: int = 0
    error_items: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    stopped_at: dict[str, Any] | None = None  # where the import stopped (without skip_bad)
    sample: list[dict[str, Any]] = field(default_factory=list)

    def count(self, kind: str, what: str) -> None:
        self.by_kind.setdefault(kind, {"read": 0, "written": 0, "skipped": 0})[what] += 1

    def error(self, problem: Problem) -> None:
        self.errors += 1
        if len(self.error_items) < MAX_REPORTED:
            self.error_items.append(problem.to_dict())

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "source", "path", "tenant", "agent", "dry_run", "items", "written", "skipped", "by_kind", "entities",
            "relations", "sessions", "errors", "error_items", "notes", "stopped_at")}
        if self.dry_run:
            out["sample"] = self.sample
        return out


def write_source(
    core: MemoryCore, read: Read, *, source: str, path: str, tenant: str, agent: str, extract: bool = True,
    dry_run: bool = False,
    skip_bad: bool = False, progress: Callable[[int], None] | None = None, total: Callable[[int], None] | None = None,
) -> SourceReport:
    """Validate what ``read`` yields, then write it into ``tenant`` (see the module)."""
    tenant = v.tenant(tenant)
    agent = str(v.name(agent, "agent"))
    report = SourceReport(source, path, tenant, agent, dry_run=dry_run)
    ordered: list[tuple[SourceItem, dict[str, Any]] | Problem] = []
    entities: set[str] = set()
    sessions: set[str] = set()
    for got in read:
        if isinstance(got, Note):
            if len(report.notes) < MAX_REPORTED:
                report.notes.append(got.to_dict())
            continue
        if isinstance(got, Problem):
            report.items += 1
            ordered.append(got)
            continue
        report.items += 1
        report.count(got.kind, "read")
        item = got.add_item(tenant, agent)
        try:
            core.writer.prepare(item, extract=False)
        except MemoryCoreError as exc:
            name = exc.fields.get("field")  # the source's own field when the reader named one, else the add's
            where = got.where if got.where.field or not name else got.where.at(str(name))
            ordered.append(Problem(where, exc.message, exc.code))
            continue
        ordered.append((got, item))
        entities |= {entity_norm(e["name"]) for e in got.entities}
        report.relations += len(got.relations)
        sessions.add(got.session)
    report.entities, report.sessions = len(entities), len(sessions)
    todo: list[tuple[SourceItem, dict[str, Any]]] = []
    for entry in ordered:
        if isinstance(entry, Problem):
            report.error(entry)
            if not skip_bad and not dry_run:
                report.stopped_at = entry.where.to_dict()
                break
        else:
            todo.append(entry)
    if total is not None:
        total(len(todo))
    if dry_run:
        _dry(core, tenant, todo, report)
        return report
    for start in range(0, len(todo), WRITE_BATCH):
        chunk = todo[start : start + WRITE_BATCH]
        present = [_present(core, tenant, item) for _got, item in chunk]  # written before: not embedded again
        for (got, _item), there in zip(chunk, present, strict=True):
            if there:
                report.skipped += 1
                report.count(got.kind, "skipped")
        fresh = [entry for entry, there in zip(chunk, present, strict=True) if not there]
        results = core.writer.add_many([item for _got, item in fresh], extract=extract) if fresh else []
        for (got, _item), result in zip(fresh, results, strict=True):
            what = "written" if result.created else "skipped"  # another writer may have taken the key meanwhile
            setattr(report, what, getattr(report, what) + 1)
            report.count(got.kind, what)
        if progress is not None:
            progress(len(chunk))
    return report


def _present(core: MemoryCore, tenant: str, item: dict[str, Any]) -> bool:
    """Whether the tenant holds the item's key already (an earlier run wrote it)."""
    scoped = scoped_idempotency_key(item["idempotency_key"], "tenant", str(item["agent"]))
    assert scoped is not None
    with graph_errors("reading the tenant"):
        return core.graph.by_idempotency_key(tenant, scoped) is not None


def _dry(core: MemoryCore, tenant: str, todo: list[tuple[SourceItem, dict[str, Any]]], report: SourceReport) -> None:
    """Count what would be written (an item whose key the tenant holds, or an earlier item of the
    source holds, would be answered, not written) and keep the first rows."""
    keys: set[str] = set()  # a source item's key is a shared (tenant-wide) one
    for got, item in todo:
        present = got.key in keys or _present(core, tenant, item)
        keys.add(got.key)
        what = "skipped" if present else "written"
        setattr(report, what, getattr(report, what) + 1)
        report.count(got.kind, what)
        if not present and len(report.sample) < SAMPLE_ROWS:
            report.sample.append({"file": got.where.file, "line": got.where.line, "kind": got.kind,
                                  "session": got.session, "type": got.type, "content": got.content[:200],
                                  "entities": [e["name"] for e in got.entities]})


# ---- helpers the readers share ----------------------------------------------------------------------

def source_key(source: str, *parts: object) -> str:
    """An idempotency key derived from the source: the format and a hash of what identifies the item."""
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{source}:{digest[:40]}"


def slug(text: str, limit: int = 60) -> str:
    """A session-name part: lowercase words joined by '-', accents and punctuation dropped, non-Latin
    letters kept (NAME_PATTERN allows them), at most ``limit`` characters."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = re.findall(r"\w+", folded)
    return "-".join(words)[:limit].strip("-") or "untitled"


def entity_kind(value: object) -> str | None:
    """A source's entity type as a memory-core kind (lowercase, spaces as '_'), or None when it cannot be one."""
    if not isinstance(value, str):
        return None
    kind = re.sub(r"[\s]+", "_", value.strip().casefold())
    kind = re.sub(r"[^a-z0-9_-]", "", kind)[:32]
    return kind if KIND_PATTERN.match(kind) else None


def memory_type(category: str | None, default: str = "note") -> str:
    """A source's category as a memory type when it can be one (``decision``, ``todo``, …), else ``default``;
    never turn, handoff or episode (those mean something else here)."""
    if not category:
        return default
    mtype = re.sub(r"[\s-]+", "_", category.strip().casefold())
    if re.fullmatch(r"[a-z][a-z0-9_]{0,31}", mtype) and mtype not in RESERVED_TYPES:
        return mtype
    return default


def relation_words(label: str) -> str:
    """A relation label as words in a sentence (``works_at`` -> ``works at``); the label itself is kept."""
    return " ".join(label.replace("_", " ").split())


def file_time(path: Path) -> datetime:
    """The file's modification time (UTC): when the source last knew what the file holds."""
    return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def parse_time(value: object) -> datetime | None:
    """An ISO-8601 timestamp or date from a source (a timestamp without a zone is taken as UTC)."""
    if isinstance(value, datetime):
        stamp = value
    elif isinstance(value, str) and value.strip():
        try:
            stamp = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    else:
        from datetime import date

        if isinstance(value, date):
            stamp = datetime(value.year, value.month, value.day)
        else:
            return None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=UTC)
    try:
        stamp = stamp.astimezone(UTC)
    except OverflowError:
        return None
    return stamp if 1970 <= stamp.year <= 9998 else None


def read_text(path: Path, shown: str) -> str | Problem:
    """A file's text as UTF-8 (a byte order mark dropped), or the Problem naming the line of the first bad byte."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return Problem(Where(shown, line), f"The file is not valid UTF-8 (byte 0x{data[exc.start]:02x} on line "
                                           f"{line}).")
