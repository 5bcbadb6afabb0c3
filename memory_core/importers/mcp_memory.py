"""The official MCP memory server's knowledge graph (``@modelcontextprotocol/server-memory``).

Its file (``memory.json``, newer versions ``memory.jsonl``) holds one JSON object a line::

    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Works at Acme"]}
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"}

The whole graph its ``read_graph`` tool and ``memory://knowledge-graph`` resource return (one JSON
document, ``{"entities": [{name, entityType, observations}], "relations": [{from, to,
relationType}]}``) is read the same way, each element typed by its array.

Mapping (one session named after the file, ``mcp-memory:<file stem>``; type ``fact``; the file's
modification time as every memory's time):

- each observation -> a memory ``"<entity>: <observation>"`` that declares (MENTIONS) the entity,
  with its ``entityType`` as the entity's kind (lowercased, spaces as ``_``; the original in
  metadata);
- an entity without observations -> one memory ``"<entity> (<entityType>)"`` declaring it, so
  every entity of the graph is an ENTITY here too;
- each relation -> a memory ``"<from> <relationType> <to>"`` declaring both entities and the
  relation between them (``related`` follows it). A relation to an entity the file does not
  define creates that entity without a kind (noted).

memory-core matches entity names without regard to case, so ``Alice`` and ``alice`` become one
entity (noted); the MCP server kept them apart. Keys hash the entity name and the observation (or
the relation's three parts), so re-importing the file, or a newer copy of it, adds only what is new.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from graph.api import entity_norm
from memory_core.entities.declared import MAX_NAME_CHARS
from memory_core.importers.json_records import records
from memory_core.importers.source import (
    Note,
    Problem,
    Read,
    SourceItem,
    Where,
    entity_kind,
    file_time,
    read_text,
    relation_words,
    slug,
    source_key,
)

NAME = "mcp-memory"
DEFAULT_AGENT = "mcp-memory"
MEMORY_TYPE = "fact"
MAX_LABEL_CHARS = 64
DOCUMENT_KEYS = frozenset({"entities", "relations"})  # read_graph's whole graph (JSON Lines otherwise)


@dataclass
class _Entity:
    name: str
    entity_type: str
    kind: str | None
    where: Where
    observations: set[str] = field(default_factory=set)  # imported so far (the MCP server keeps them unique)
    declared: bool = False  # some memory of the import declares it


def read(path: Path, shown: str | None = None) -> Read:
    """The memories ``path`` (a memory.json / memory.jsonl) becomes, in file order."""
    shown = shown or path.name
    session = f"{NAME}:{slug(path.stem)}"
    when = file_time(path)
    entities: dict[str, _Entity] = {}  # by exact name, as the MCP server keys them
    by_norm: dict[str, _Entity] = {}  # as memory-core matches them
    undefined: dict[str, Where] = {}  # relation ends no entity line defined (yet)
    text = read_text(path.resolve(), shown)  # the file named on the command line: a link to it is followed
    if isinstance(text, Problem):
        yield text
        return
    for got in records(text, shown, document_keys=DOCUMENT_KEYS, record_keys=DOCUMENT_KEYS):
        where = got.where
        if got.top:
            continue
        value = got.value
        if got.key is not None and isinstance(value, dict) and "type" not in value:  # read_graph: typed by its array
            value = {"type": "entity" if got.key == "entities" else "relation", **value}
        record = value if isinstance(value, Problem) else _record(value, where)
        if isinstance(record, Problem):
            yield record
        elif record["type"] == "entity":
            yield from _entity(record, where, entities, by_norm, session, when)
        else:
            yield from _relation(record, where, entities, by_norm, undefined, session, when)
    for name, where in undefined.items():
        if entity_norm(name) not in by_norm:
            yield Note(where, f"the relation names {name!r}, which the file does not define as an entity: it is "
                              "created without a kind")


def _declare(ent: _Entity, name: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name or ent.name}
    if ent.kind is not None:
        out["kind"] = ent.kind
    return out


def _record(record: Any, where: Where) -> dict[str, Any] | Problem:
    if not isinstance(record, dict):
        return Problem(where, "A line must be a JSON object (an entity or a relation).")
    if record.get("type") not in ("entity", "relation"):
        return Problem(where.at("type"), "'type' must be \"entity\" or \"relation\".")
    return record


def _text(record: dict[str, Any], name: str, where: Where, limit: int | None = None) -> str | Problem:
    value = record.get(name)
    if not isinstance(value, str) or not value.strip():
        return Problem(where.at(name), f"'{name}' must be a non-empty string.")
    if limit is not None and len(" ".join(value.split())) > limit:
        return Problem(where.at(name), f"'{name}' has {len(value)} characters; memory-core keeps at most {limit}.")
    return value


def _entity(record: dict[str, Any], where: Where, entities: dict[str, _Entity], by_norm: dict[str, _Entity],
            session: str, when: datetime) -> Iterator[SourceItem | Problem | Note]:
    name = _text(record, "name", where, MAX_NAME_CHARS)
    if isinstance(name, Problem):
        yield name
        return
    entity_type = record.get("entityType", "")
    if not isinstance(entity_type, str):
        yield Problem(where.at("entityType"), "'entityType' must be a string.")
        return
    observations = record.get("observations", [])
    if not isinstance(observations, list):
        yield Problem(where.at("observations"), "'observations' must be a list of strings.")
        return
    ent = entities.get(name)
    if ent is None:
        kind = entity_kind(entity_type)
        if entity_type.strip() and kind is None:
            yield Note(where.at("entityType"), f"entityType {entity_type!r} cannot be a memory-core kind (letters, "
                                               "digits, '_', '-'): the entity has none; the type is kept in metadata")
        elif kind is not None and kind != "_".join(entity_type.casefold().split()):
            yield Note(where.at("entityType"), f"entityType {entity_type!r} is the kind {kind!r} here (kinds hold "
                                               "letters, digits, '_' and '-'); the type is kept in metadata")
        ent = entities[name] = _Entity(name, entity_type, kind, where)
        first = by_norm.setdefault(entity_norm(name), ent)
        if first is not ent:
            yield Note(where, f"entity {name!r} is the same entity as {first.name!r} (line {first.where.line}) here: "
                              "memory-core matches entity names without regard to case; both keep their observations")
    else:
        yield Note(where, f"entity {name!r} is defined again (first on line {ent.where.line}); its observations are "
                          "added to the first")
    meta = {"entity": name, "entityType": ent.entity_type}
    declared = [_declare(ent)]
    written = 0
    for index, obs in enumerate(observations):
        at = where.at(f"observations[{index}]")
        if not isinstance(obs, str):
            yield Problem(at, "An observation must be a string.")
        elif not obs.strip():
            yield Note(at, "an empty observation is skipped")
        elif obs not in ent.observations:
            ent.observations.add(obs)
            written += 1
            yield SourceItem("observation", at, f"{name}: {obs}", session, when, ("observation", name), MEMORY_TYPE,
                             metadata={NAME: meta}, entities=declared,
                             legacy_keys=(source_key(NAME, "observation", name, obs),))
    if not written and not ent.declared:
        ent.declared = True
        shown_type = f" ({entity_type})" if entity_type.strip() else ""
        yield SourceItem("entity", where, f"{name}{shown_type}", session, when, ("entity", name), MEMORY_TYPE,
                         metadata={NAME: meta}, entities=declared, legacy_keys=(source_key(NAME, "entity", name),))
    ent.declared = ent.declared or written > 0


def _relation(record: dict[str, Any], where: Where, entities: dict[str, _Entity], by_norm: dict[str, _Entity],
              undefined: dict[str, Where], session: str, when: datetime) -> Iterator[SourceItem | Problem]:
    rel = {}
    for name, limit in (("from", MAX_NAME_CHARS), ("to", MAX_NAME_CHARS), ("relationType", MAX_LABEL_CHARS)):
        value = _text(record, name, where, limit)
        if isinstance(value, Problem):
            yield value
            return
        rel[name] = value
    ends: list[dict[str, Any]] = []
    for end in ("from", "to"):
        ent = entities.get(rel[end]) or by_norm.get(entity_norm(rel[end]))
        if ent is None:
            undefined.setdefault(rel[end], where.at(end))
        if not any(entity_norm(e["name"]) == entity_norm(rel[end]) for e in ends):
            ends.append({"name": rel[end]} if ent is None else _declare(ent, rel[end]))
    content = f"{rel['from']} {relation_words(rel['relationType'])} {rel['to']}"
    identity = ("relation", rel["from"], rel["relationType"], rel["to"])
    yield SourceItem("relation", where, content, session, when, identity, MEMORY_TYPE,
                     metadata={NAME: {"relation": rel}}, entities=ends,
                     relations=[{"from": rel["from"], "to": rel["to"], "label": rel["relationType"]}],
                     legacy_keys=(source_key(NAME, *identity),))
