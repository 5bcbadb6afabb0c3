"""Entities and relations as a writer declares them on ``add_memory``: strict validation into the
graph seam's specs, merged with what the extractor found in the text.

``entities``: a list of ``{name, kind?, aliases?}``; ``relations``: a list of ``{from, to, label}``
whose ends are names or aliases of this memory's declared entities. Anything else is an
INVALID_INPUT naming the field (e.g. ``entities[2].aliases[0]``), raised before any write.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from graph.api import EntitySpec, RelationSpec, entity_norm
from memory_core.errors import InvalidInputError

MAX_ENTITIES = 32
MAX_RELATIONS = 32
MAX_ALIASES = 16
MAX_NAME_CHARS = 200
KIND_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
LABEL_PATTERN = re.compile(r"^[^\x00-\x1f\x7f]{1,64}$")
_ENTITY_KEYS = frozenset({"name", "kind", "aliases"})
_RELATION_KEYS = frozenset({"from", "to", "label"})


def _name(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"'{where}' must be a string.", field=where)
    text = " ".join(unicodedata.normalize("NFC", value).split())
    if not text:
        raise InvalidInputError(f"'{where}' must not be empty.", field=where)
    if len(text) > MAX_NAME_CHARS or any(unicodedata.category(c) == "Cc" for c in text):
        raise InvalidInputError(f"'{where}' must be at most {MAX_NAME_CHARS} printable characters.", field=where)
    return text


def _list(value: object, where: str, cap: int) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise InvalidInputError(f"'{where}' must be a list.", field=where)
    if len(value) > cap:
        raise InvalidInputError(f"'{where}' holds at most {cap} items.", field=where)
    return list(value)


def _object(value: object, where: str, keys: frozenset[str]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInputError(f"'{where}' must be an object.", field=where)
    unknown = set(value) - keys
    if unknown:
        raise InvalidInputError(f"'{where}' has unknown fields: {', '.join(sorted(map(str, unknown)))}.",
                                field=where)
    return value


def entities(value: object) -> list[EntitySpec]:
    """``[{name, kind?, aliases?}]`` as specs (aliases without repeats or the name itself)."""
    out: list[EntitySpec] = []
    for i, item in enumerate(_list(value, "entities", MAX_ENTITIES)):
        where = f"entities[{i}]"
        obj = _object(item, where, _ENTITY_KEYS)
        name = _name(obj.get("name"), f"{where}.name")
        kind = obj.get("kind")
        if kind is not None and (not isinstance(kind, str) or not KIND_PATTERN.match(kind)):
            raise InvalidInputError(f"'{where}.kind' must match {KIND_PATTERN.pattern}.", field=f"{where}.kind")
        aliases = [_name(a, f"{where}.aliases[{j}]")
                   for j, a in enumerate(_list(obj.get("aliases"), f"{where}.aliases", MAX_ALIASES))]
        seen, unique = {entity_norm(name)}, []
        for alias in aliases:
            if entity_norm(alias) not in seen:
                seen.add(entity_norm(alias))
                unique.append(alias)
        out.append(EntitySpec(name, kind, tuple(unique)))
    return out


def relations(value: object, declared: Sequence[EntitySpec]) -> list[RelationSpec]:
    """``[{from, to, label}]`` as specs; both ends must name one of ``declared``."""
    known = {entity_norm(n) for e in declared for n in (e.name, *e.aliases)}
    out: list[RelationSpec] = []
    for i, item in enumerate(_list(value, "relations", MAX_RELATIONS)):
        where = f"relations[{i}]"
        obj = _object(item, where, _RELATION_KEYS)
        ends = []
        for end in ("from", "to"):
            name = _name(obj.get(end), f"{where}.{end}")
            if entity_norm(name) not in known:
                raise InvalidInputError(f"'{where}.{end}' ({name!r}) is not one of this memory's entities; "
                                        "declare it in 'entities'.", field=f"{where}.{end}")
            ends.append(name)
        label = obj.get("label")
        if not isinstance(label, str) or not LABEL_PATTERN.match(" ".join(label.split())):
            raise InvalidInputError(f"'{where}.label' must be 1-64 printable characters.", field=f"{where}.label")
        out.append(RelationSpec(ends[0], ends[1], " ".join(label.split())))
    return out


def with_extracted(declared: Sequence[EntitySpec], found: Sequence[Any]) -> list[EntitySpec]:
    """The declared entities, then each extracted one (``.name``, ``.kind``) no declared name or
    alias already covers."""
    covered = {entity_norm(n) for e in declared for n in (e.name, *e.aliases)}
    out = list(declared)
    for item in found:
        name = " ".join(str(item.name).split())[:MAX_NAME_CHARS]
        norm = entity_norm(name)
        if norm and norm not in covered:
            covered.add(norm)
            kind = getattr(item, "kind", None)
            out.append(EntitySpec(name, kind if isinstance(kind, str) and KIND_PATTERN.match(kind) else None))
    return out
