"""What a source becomes, and how it is written: the part every ``--from`` format shares.

A reader (one module per format) turns a file or folder into :class:`SourceItem` values — one
memory each, with the entities and relations it declares and what identifies it in its source —
and :class:`Problem` values for what it cannot read, both in source order.
:func:`write_source` validates every item as an add would (the secrets guard included), then writes
them in batches through the journaled write path (each batch all-or-nothing, entities and relations
in the same graph transaction as their memory):

- **Idempotent**: each item's idempotency key hashes what identifies it in its source (a mem0 id,
  a note's permalink, a file and heading) and its text *as stored* — after the secrets guard, so no
  key is a hash of a secret. An item whose key is already in the tenant is answered by the memory
  it wrote before, so a rerun (or the run after a kill) adds nothing and finishes what is missing.
  Keys an earlier release derived for the same item (``legacy_keys``) are recognised when the
  memory they name holds the same text, so upgrading never doubles a store.
- **Bad input** (a :class:`Problem`, or an item an add would refuse) is named by file, line and
  field. By default the import stops there (the items before it are written); ``skip_bad``
  writes every good item and lists the rest. ``dry_run`` writes nothing and reports what would
  be written, per kind, with the first rows.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import unicodedata
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graph.api import entity_norm
from memory_core import validation as v
from memory_core.entities.declared import KIND_PATTERN
from memory_core.errors import MemoryCoreError
from memory_core.models import to_us
from memory_core.secret_guard import detect, redact
from memory_core.store_errors import graph_errors
from memory_core.write.add_rows import PreparedAdd
from memory_core.write.hygiene import junk_reason
from memory_core.write.request import AddItem
from memory_core.write.rows import scoped_idempotency_key

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

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
    paragraph, …: the report counts by it); ``identity`` is what identifies it in its source besides
    its text (its idempotency key hashes both, see :func:`item_key`); ``legacy_keys`` are the keys
    earlier releases gave the same item; ``agent`` None means the import's agent."""

    kind: str
    where: Where
    content: str
    session: str
    timestamp: datetime
    identity: tuple[str | int, ...]
    type: str = "note"
    agent: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    entities: list[dict[str, Any]] = field(default_factory=list)
    relations: list[dict[str, Any]] = field(default_factory=list)
    legacy_keys: tuple[str, ...] = ()
    valid_to: datetime | None = None  # the source says it stopped being valid then: written ended (valid_to)
    extract: bool = True  # run the entity extractor on it when the format does (not on code: SELECT, FROM…)

    def add_item(self, tenant: str, agent: str, key: str) -> AddItem:
        """The add_memory arguments of this item, under the idempotency ``key``."""
        return {"tenant": tenant, "session": self.session, "agent": self.agent or agent, "content": self.content,
                "type": self.type, "timestamp": self.timestamp, "idempotency_key": key,
                "metadata": self.metadata, "entities": self.entities or None, "relations": self.relations or None,
                "provenance": "import"}


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


class Duplicate(Note):
    """An item the source holds twice (the same identity and text): imported once, counted in the report."""


class Expired(Note):
    """An item whose source says it is no longer valid (mem0's ``expiration_date``), counted in the report."""


class LinkSkipped(Note):
    """A symbolic link in an imported folder, not followed (counted in the report's ``links_skipped``)."""


class Caution(Note):
    """Something about the whole source the user must see (a dump that may be cut): the report's warnings."""


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
    duplicates: int = 0  # items the source holds twice (the same identity and text): imported once
    expired: int = 0  # items past their expiration in the source (skipped, or written ended when asked)
    links_skipped: int = 0  # symbolic links in an imported folder, never followed (each named in notes)
    junk: dict[str, int] = field(default_factory=dict)  # with hygiene: items left out, by reason (write/hygiene.py)
    redacted: dict[str, int] = field(default_factory=dict)  # secrets the guard replaced in what was written
    by_kind: dict[str, dict[str, int]] = field(default_factory=dict)  # kind -> {read, written, skipped}
    entities: int = 0  # distinct entities its memories mention: declared, and found by the extractor
    relations: int = 0
    sessions: int = 0
    errors: int = 0
    error_items: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    stopped_at: dict[str, Any] | None = None  # where the import stopped (without skip_bad)
    sample: list[dict[str, Any]] = field(default_factory=list)

    def count(self, kind: str, what: str) -> None:
        self.by_kind.setdefault(kind, {"read": 0, "written": 0, "skipped": 0})[what] += 1

    def redactions(self, found: dict[str, int]) -> None:
        """Count the secrets the guard replaced in one memory written (kind -> count, as an add reports them)."""
        for kind, n in found.items():
            self.redacted[kind] = self.redacted.get(kind, 0) + n
        self.redacted = dict(sorted(self.redacted.items()))

    def error(self, problem: Problem) -> None:
        self.errors += 1
        if len(self.error_items) < MAX_REPORTED:
            self.error_items.append(problem.to_dict())

    def to_dict(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in (
            "source", "path", "tenant", "agent", "dry_run", "items", "written", "skipped", "duplicates", "expired",
            "junk", "links_skipped", "redacted", "by_kind", "entities", "relations", "sessions", "errors",
            "error_items", "warnings", "notes", "stopped_at")}
        if self.dry_run:
            out["sample"] = self.sample
        return out


def write_source(
    parts: OperatorParts, read: Read, *, source: str, path: str, tenant: str, agent: str, extract: bool = True,
    dry_run: bool = False,
    skip_bad: bool = False, progress: Callable[[int], None] | None = None, total: Callable[[int], None] | None = None,
    hygiene: bool = False,
) -> SourceReport:
    """Validate what ``read`` yields, then write it into ``tenant`` (see the module). ``hygiene``: leave out the
    items write-time hygiene finds carry no information (:func:`memory_core.write.hygiene.junk_reason`), counted
    by reason in the report's ``junk``; off by default (an import keeps what the other tool held)."""
    tenant = v.tenant(tenant)
    agent = str(v.name(agent, "agent"))
    report = SourceReport(source, path, tenant, agent, dry_run=dry_run)
    ordered: list[_Prepared | Problem] = []
    entities: set[str] = set()
    sessions: set[str] = set()
    for got in read:
        if isinstance(got, Duplicate):
            report.duplicates += 1
        elif isinstance(got, Expired):
            report.expired += 1
        elif isinstance(got, LinkSkipped):
            report.links_skipped += 1
        elif isinstance(got, Caution):
            report.warnings.append(got.to_dict())
            continue
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
        try:
            prepared = _prepare(parts, source, got, tenant, agent, extract=extract and got.extract)
        except MemoryCoreError as exc:
            name = exc.fields.get("field")  # the source's own field when the reader named one, else the add's
            where = got.where if got.where.field or not name else got.where.at(str(name))
            ordered.append(Problem(where, exc.message, exc.code))
            continue
        reason = junk_reason(prepared.row.content) if hygiene else None
        if reason is not None:
            report.junk[reason] = report.junk.get(reason, 0) + 1
            continue
        ordered.append(_Prepared(got, prepared))
        entities |= {entity_norm(e.name) for e in prepared.entities}  # declared and extracted, as stored
        report.relations += len(got.relations)
        sessions.add(got.session)
    report.entities, report.sessions = len(entities), len(sessions)
    todo: list[_Prepared] = []
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
        _dry(parts, tenant, todo, report)
        return report
    batch = min(WRITE_BATCH, parts.writer.limits.max_batch)
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        present = [_present(parts, tenant, entry) for entry in chunk]  # written before: not embedded again
        for entry, there in zip(chunk, present, strict=True):
            if there:
                report.skipped += 1
                report.count(entry.got.kind, "skipped")
        fresh = [entry for entry, there in zip(chunk, present, strict=True) if not there]
        results = parts.writer.write_prepared([e.prepared for e in fresh], extract=extract) if fresh else []
        for entry, result in zip(fresh, results, strict=True):
            what = "written" if result.created else "skipped"  # the same key earlier in the source, or another writer
            setattr(report, what, getattr(report, what) + 1)
            report.count(entry.got.kind, what)
            if result.created:
                report.redactions(result.redacted)
        if progress is not None:
            progress(len(chunk))
    return report


@dataclass
class _Prepared:
    """A source item validated into the row it becomes (guarded text, its final idempotency key)."""

    got: SourceItem
    prepared: PreparedAdd


def _prepare(parts: OperatorParts, source: str, got: SourceItem, tenant: str, agent: str, *,
             extract: bool) -> PreparedAdd:
    """The item validated as an add would be, under its key (:func:`item_key` of the guarded text)."""
    prepared = parts.writer.prepare(got.add_item(tenant, agent, f"{source}:pending"), extract=extract)
    row, node = prepared.row, prepared.row.node
    if got.valid_to is not None:  # written as an ended version is (recall shows only current rows)
        node = replace(node, valid_to_us=to_us(got.valid_to))
    key = item_key(source, got.identity, row.content, guarded=parts.writer.guard.active)
    scoped = scoped_idempotency_key(v.idempotency_key(key), node.visibility, node.agent)
    prepared.row = replace(row, node=node, idempotency_key=scoped)
    return prepared


def item_key(source: str, identity: tuple[str | int, ...], stored: str, *, guarded: bool = True) -> str:
    """An item's idempotency key: a hash of what identifies it in the source and of its text as
    stored (``stored``: after the secrets guard). Strings of the identity pass the guard's detector
    first (``guarded``), so a secret in a heading or a name never reaches a key, even as a hash."""
    parts = [_redacted(p) if guarded and isinstance(p, str) else p for p in identity]
    return source_key(source, *parts, stored)


@lru_cache(maxsize=4096)
def _redacted(part: str) -> str:
    """``part`` with its secrets replaced (identities repeat: an entity's name for each observation, a
    file for each block; the detector runs once for each)."""
    return redact(part, detect(part))


def _present(parts: OperatorParts, tenant: str, entry: _Prepared) -> bool:
    """Whether the tenant holds the item already: under its key (an earlier run wrote it), or under a key
    an earlier release gave it, holding the same text (its session may differ: Markdown sessions are
    named from the vault's root since issue 47, and the row keeps the one it was written with)."""
    node = entry.prepared.row.node
    with graph_errors("reading the tenant"):
        if parts.graph.by_idempotency_key(tenant, str(entry.prepared.idempotency_key)) is not None:
            return True
        for old in entry.got.legacy_keys:
            scoped = scoped_idempotency_key(old, node.visibility, node.agent)
            found = parts.graph.by_idempotency_key(tenant, str(scoped))
            if found is not None and found.content_hash == node.content_hash:
                return True
    return False


def _dry(parts: OperatorParts, tenant: str, todo: list[_Prepared], report: SourceReport) -> None:
    """Count what would be written (an item whose key the tenant holds, or an earlier item of the
    source holds, would be answered, not written) and keep the first rows."""
    keys: set[str] = set()
    for entry in todo:
        key = str(entry.prepared.idempotency_key)
        present = key in keys or _present(parts, tenant, entry)
        keys.add(key)
        what = "skipped" if present else "written"
        got = entry.got
        setattr(report, what, getattr(report, what) + 1)
        report.count(got.kind, what)
        if not present:
            report.redactions(entry.prepared.redacted)
        if not present and len(report.sample) < SAMPLE_ROWS:
            report.sample.append({"file": got.where.file, "line": got.where.line, "kind": got.kind,
                                  "session": got.session, "type": got.type,
                                  "content": entry.prepared.row.content[:200],
                                  "entities": [e.name for e in entry.prepared.entities]})


# ---- helpers the readers share ----------------------------------------------------------------------

def source_key(source: str, *parts: object) -> str:
    """An idempotency key derived from the source: the format and a hash of what identifies the item."""
    digest = hashlib.sha256("\x00".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).hexdigest()
    return f"{source}:{digest[:40]}"


@lru_cache(maxsize=4096)  # a heading names every block under it, a user every memory of theirs
def slug(text: str, limit: int = 60) -> str:
    """A session-name part: lowercase words joined by '-', accents and punctuation dropped, non-Latin
    letters kept (NAME_PATTERN allows them), at most ``limit`` characters. A secret in ``text`` (a
    heading ``DD_API_KEY=…``) is replaced by its marker first: a session name is no place for one."""
    found = detect(text)
    if found:
        text = redact(text, found)
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = re.findall(r"\w+", folded)
    return "-".join(words)[:limit].strip("-") or "untitled"


@lru_cache(maxsize=4096)
def safe_name(name: str, limit: int = 120) -> str:
    """A name taken from the source as it is (a permalink, a mem0 run id), unless it holds a secret:
    then its :func:`slug`, the secret replaced by its marker."""
    return slug(name, limit) if detect(name) else name


def entity_kind(value: object) -> str | None:
    """A source's entity type as a memory-core kind, or None when it cannot be one: lowercase, each run of
    spaces or punctuation as one ``_`` (``Software Project`` -> ``software_project``, ``team/group`` ->
    ``team_group``: the words stay apart); a type holding letters outside a-z (``人物``) has none."""
    if not isinstance(value, str):
        return None
    kind = re.sub(r"(?:[^\w-]|_)+", "_", value.strip().casefold()).strip("_")
    kind = kind[:32].rstrip("_")
    return kind if kind and KIND_PATTERN.match(kind) else None


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


def read_bytes(path: Path) -> bytes:
    """A regular file's bytes, never through a symbolic link (a folder's file swapped for one after it
    was listed is refused, ELOOP) and never blocking on a named pipe (OSError otherwise)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise IsADirectoryError(errno.EINVAL, "not a regular file", str(path))
        return fh.read()


def read_text(path: Path, shown: str) -> str | Problem:
    """A file's text (a byte order mark dropped), or the Problem saying why it cannot be read (see
    :func:`read_bytes`). A byte that is not UTF-8 is kept in place as a lone surrogate
    (``surrogateescape``): the block holding it is refused (:func:`undecodable`), not the whole file."""
    try:
        data = read_bytes(path)
    except OSError as exc:
        return Problem(Where(shown), f"The file cannot be read: {exc.strerror or exc}.")
    return data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")


_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # how surrogateescape keeps a byte that is not UTF-8


def undecodable(text: str, where: Where, start: int = 0, end: int | None = None) -> Problem | None:
    """The Problem of ``text[start:end]`` (read with :func:`read_text`, starting on ``where``'s line) when it
    holds a byte that is not UTF-8, naming that byte and its line; else None."""
    bad = _ESCAPED_BYTE.search(text, start, len(text) if end is None else end)
    if bad is None:
        return None
    line = (where.line or 1) + text.count("\n", start, bad.start())
    return Problem(Where(where.file, line, where.field),
                   f"The text is not valid UTF-8 (byte 0x{ord(bad.group()) - 0xDC00:02x} on line {line}).")
