"""mem0 memories: what ``Memory.get_all()`` / ``MemoryClient.get_all()`` return, saved as JSON — a list
of memories, or ``{"results": [...]}`` (with ``"relations"`` when mem0's graph memory is on) — or
one memory a line (JSONL). A memory::

    {"id": "9f3c…", "memory": "Prefers window seats", "hash": "5d41…", "metadata": {"source": "chat"},
     "user_id": "alice", "agent_id": "travel-bot", "run_id": "trip-42", "categories": ["travel"],
     "created_at": "2025-03-01T10:00:00.123456-08:00", "updated_at": null}

Mapping: each memory -> a memory of type ``fact`` with its text; ``agent_id`` -> the author (else the
import's agent); ``run_id`` -> the session (else ``user:<user_id>``, else ``mem0``); ``created_at``
-> its time (``updated_at``, then the file's time, when absent; a time without a zone is UTC); its
``metadata`` kept as the memory's metadata, with mem0's own fields (id, user/agent/run/actor ids,
role, categories, created_at, updated_at, expiration_date) under ``mem0`` — not its ``hash``, the md5
of the clear text: a hash of a short password is the password, and the guard redacts text, not
hashes of it. Graph relations
(``{"source", "relationship", "destination"|"target"}``) -> a memory ``"<source> <relationship>
<destination>"`` declaring both entities and the relation. The key is mem0's ``id`` and the text
(scoped by user, agent and run for a memory without an id), never the export's ``hash``, which
different memories may share: a memory whose text changed in mem0 comes in as a new memory, an
unchanged one is never written twice, and one the file holds twice (same id and text) is imported
once and counted in the report's ``duplicates``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from memory_core.entities.declared import MAX_NAME_CHARS
from memory_core.importers.json_records import records
from memory_core.importers.source import (
    Caution,
    Duplicate,
    Expired,
    Note,
    Problem,
    Read,
    SourceItem,
    Where,
    file_time,
    parse_time,
    read_text,
    relation_words,
    safe_name,
    slug,
    source_key,
)
from memory_core.validation import NAME_PATTERN

NAME = "mem0"
MEMORY_TYPE = "fact"
_OWN_FIELDS = ("id", "user_id", "agent_id", "run_id", "actor_id", "role", "categories", "created_at",
               "updated_at", "expiration_date", "immutable", "app_id")
DEFAULT_TOP_K = 20  # what mem0 2.x's Memory.get_all returns when not given top_k
RECORD_KEYS = frozenset({"results", "memories", "relations"})
DOCUMENT_KEYS = RECORD_KEYS | {"count", "next", "previous"}  # the platform client's pages start with "count"


def read(path: Path, shown: str | None = None, *, include_expired: bool = False) -> Read:
    """The memories a mem0 export (JSON or JSONL) becomes, in file order. An expired memory (its
    ``expiration_date`` is past) is skipped and counted, or with ``include_expired`` written ended
    at its expiration (never as a live fact)."""
    shown = shown or path.name
    when = file_time(path)
    now = datetime.now(UTC)
    text = read_text(path.resolve(), shown)  # the file named on the command line: a link to it is followed
    if isinstance(text, Problem):
        yield text
        return
    seen: dict[str, dict[str, int]] = {}  # mem0 id -> {text: the line it was first on}
    memories = 0
    page: dict[str, Any] = {}  # the platform client's count / next, when the file is one of its pages
    for record in records(text, shown, document_keys=DOCUMENT_KEYS, record_keys=RECORD_KEYS):
        if record.top:
            page[str(record.key)] = record.value
            continue
        if record.key != "relations":
            memories += 1
        if isinstance(record.value, Problem):
            yield record.value
        elif record.key == "relations":
            yield _relation(record.value, record.where, when)
        else:
            got = _memory(record.value, record.where, when)
            if isinstance(got, SourceItem) and got.valid_to is not None and got.valid_to <= now:
                day = got.metadata[NAME]["expiration_date"]
                if not include_expired:
                    yield Expired(got.where, f"expired on {day}: skipped (--include-expired imports it, ended then)")
                    continue
                yield Expired(got.where, f"expired on {day}: imported ended then (recall shows only current rows)")
            elif isinstance(got, SourceItem):
                got.valid_to = None  # expires later: memory-core does not end it by itself yet (kept in metadata)
            if isinstance(got, SourceItem) and isinstance(mem_id := record.value.get("id"), str) and mem_id:
                texts = seen.setdefault(mem_id, {})
                if got.content in texts:
                    yield Duplicate(got.where, f"the same memory as line {texts[got.content]} (id {mem_id}, the same "
                                               "text): imported once")
                    continue
                if texts:
                    yield Note(got.where, f"id {mem_id} is also on line {min(texts.values())} with other text: both "
                                          "are imported")
                texts[got.content] = got.where.line or 0
            yield got
    yield from _cut(shown, memories, page)


def _cut(shown: str, memories: int, page: dict[str, Any]) -> Read:
    """A warning when the dump may not hold every memory: one page of the platform client's get_all
    (``next`` set, or fewer results than its ``count``), or exactly as many as ``Memory.get_all``
    returns by default (it stops at ``top_k``, 20, without a word)."""
    count, following = page.get("count"), page.get("next")
    if following or (isinstance(count, int) and count > memories):
        total = f" of {count}" if isinstance(count, int) else ""
        yield Caution(Where(shown, 1), f"the file is one page of mem0's get_all: it holds {memories}{total} memories"
                                       + (" and 'next' names the following page" if following else "")
                                       + "; dump every page (see docs/import.md) and import each")
    elif memories == DEFAULT_TOP_K:
        yield Caution(Where(shown, 1), f"the dump holds exactly {DEFAULT_TOP_K} memories, what mem0's get_all "
                                       f"returns when not given a limit (top_k={DEFAULT_TOP_K}): it may be cut. "
                                       "Dump with get_all(filters=..., top_k=<more than you have>, show_expired=True)")


def _expiry(value: object) -> datetime | None:
    """When a memory stops being valid: mem0 keeps a date (YYYY-MM-DD) and hides the memory from the
    day after; a timestamp is taken as the instant."""
    if isinstance(value, str) and len(value.strip()) == 10:
        try:
            day = date.fromisoformat(value.strip())
        except ValueError:
            return None
        return datetime(day.year, day.month, day.day, tzinfo=UTC) + timedelta(days=1)
    return parse_time(value)


def _session(record: dict[str, Any]) -> str:
    if record.get("run_id"):
        run = str(record["run_id"])
        return safe_name(run) if NAME_PATTERN.match(run) else slug(run, 120)
    if record.get("user_id"):
        user = str(record["user_id"])
        return f"user:{safe_name(user)}" if NAME_PATTERN.match(f"user:{user}") else f"user:{slug(user, 120)}"
    return NAME


def _memory(record: Any, where: Where, when: datetime) -> SourceItem | Problem:
    if not isinstance(record, dict):
        return Problem(where, "A memory must be a JSON object.")
    text = record.get("memory", record.get("text"))
    if not isinstance(text, str) or not text.strip():
        return Problem(where.at("memory"), "'memory' must be a non-empty string.")
    metadata = record.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        return Problem(where.at("metadata"), "'metadata' must be an object or null.")
    times = {name: parse_time(record.get(name)) for name in ("created_at", "updated_at")}
    for name, parsed in times.items():
        if record.get(name) is not None and parsed is None:
            return Problem(where.at(name), f"'{name}' must be an ISO-8601 timestamp.")
    expires = _expiry(record.get("expiration_date"))
    if record.get("expiration_date") is not None and expires is None:
        return Problem(where.at("expiration_date"), "'expiration_date' must be a date (YYYY-MM-DD), as mem0 keeps it.")
    agent = record.get("agent_id")
    if agent is not None and (not isinstance(agent, str) or not NAME_PATTERN.match(agent)):
        return Problem(where.at("agent_id"), "'agent_id' must be 1-128 printable characters without whitespace "
                                             "(memory-core's agent names).")
    stamp = times["created_at"] or times["updated_at"] or when
    own = {k: record[k] for k in _OWN_FIELDS if record.get(k) is not None}
    mem_id = record.get("id")
    scope = (record.get("user_id"), record.get("agent_id"), record.get("run_id"))
    identity = ("id", mem_id) if isinstance(mem_id, str) and mem_id else ("scope", *(str(p) for p in scope))
    return SourceItem("memory", where, text, _session(record), stamp, identity, MEMORY_TYPE, agent=agent,
                      metadata={**(metadata or {}), NAME: own}, legacy_keys=(_legacy_key(record, text),),
                      valid_to=expires)


def _legacy_key(record: dict[str, Any], text: str) -> str:
    """The key releases before issue 46 gave a memory: its hash scoped by user, agent and run (which
    five different memories of one dump could share: it is only trusted when the text matches)."""
    given = record.get("hash")
    digest = given if isinstance(given, str) and given else hashlib.md5(text.encode("utf-8"),
                                                                        usedforsecurity=False).hexdigest()
    return source_key(NAME, record.get("user_id"), record.get("agent_id"), record.get("run_id"), digest)


def _relation(record: Any, where: Where, when: datetime) -> SourceItem | Problem:
    if not isinstance(record, dict):
        return Problem(where, "A relation must be a JSON object.")
    ends = {}
    for name, keys in (("source", ("source",)), ("relationship", ("relationship", "relation")),
                       ("destination", ("destination", "target"))):
        value = next((record[k] for k in keys if isinstance(record.get(k), str) and record[k].strip()), None)
        if value is None:
            return Problem(where.at(keys[0]), f"'{keys[0]}' must be a non-empty string.")
        if name != "relationship" and len(value) > MAX_NAME_CHARS:
            return Problem(where.at(keys[0]), f"'{keys[0]}' is longer than {MAX_NAME_CHARS} characters.")
        ends[name] = value
    src, label, dst = ends["source"], ends["relationship"], ends["destination"]
    entities = [{"name": src}] if src.casefold() == dst.casefold() else [{"name": src}, {"name": dst}]
    return SourceItem("relation", where, f"{src} {relation_words(label)} {dst}", "mem0-graph", when,
                      ("relation", src, label, dst), MEMORY_TYPE, metadata={NAME: {"relation": ends}},
                      entities=entities, relations=[{"from": src, "to": dst, "label": label}],
                      legacy_keys=(source_key(NAME, "relation", src, label, dst),))
