"""One add's arguments validated into a storable row, before any write: its fields, the
entities it declares and the ones the deterministic extractor finds in its text."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from graph.api import EntitySpec, RelationSpec
from memory_core import validation as v
from memory_core.entities import declared
from memory_core.entities.extract import extract_entities
from memory_core.errors import InvalidInputError
from memory_core.models import DEFAULT_SALIENCE, HANDOFF_SALIENCE, to_us
from memory_core.settings.schema import LimitSettings
from memory_core.write.rows import content_hash, scoped_idempotency_key

ADD_FIELDS = frozenset({
    "tenant", "session", "agent", "content", "type", "role", "channel", "source", "project_id",
    "salience", "visibility", "timestamp", "idempotency_key", "metadata", "entities", "relations",
})


@dataclass
class PreparedAdd:
    row: dict[str, Any]
    idempotency_key: str | None
    preferred_id: int | None = None  # imports keep their refs when the id is free
    restore: bool = False  # doctor: the record under preferred_id existed before; never delete it
    edges: list[tuple[str, str]] = field(default_factory=list)  # extra (target node, kind) from this memory
    supersedes: int | None = None  # update_memory: the version this row ends (in the same transaction)
    entities: list[EntitySpec] = field(default_factory=list)  # declared, then extracted (MENTIONS)
    relations: list[RelationSpec] = field(default_factory=list)


def prepare_add(item: dict[str, Any], limits: LimitSettings, *, extract: bool = True) -> PreparedAdd:
    """Validate one add's arguments into a storable row (no id yet). Raises before any write.
    ``extract``: add the entities the deterministic extractor finds in the text to the declared ones."""
    unknown = set(item) - ADD_FIELDS
    if unknown:
        raise InvalidInputError(f"Unknown add_memory fields: {', '.join(sorted(unknown))}.")
    lim = limits
    tenant = v.tenant(item.get("tenant"))
    text = v.content(item.get("content"), lim.max_content_chars)
    mtype = v.stored_type(item.get("type") or "turn")
    source = v.source(item.get("source"), lim.max_metadata_bytes, lim.max_metadata_depth)
    default_salience = HANDOFF_SALIENCE if mtype == "handoff" else DEFAULT_SALIENCE
    ts = v.timestamp(item.get("timestamp"))
    row: dict[str, Any] = {
        "tenant": tenant,
        "session": v.name(item.get("session"), "session"),
        "agent": v.name(item.get("agent"), "agent"),
        "type": mtype,
        "role": v.name(item.get("role"), "role", required=False),
        "channel": v.name(item.get("channel"), "channel", required=False),
        "source": source,
        "source_id": source.get("id"),
        "project_id": v.project_id(item.get("project_id")),
        "salience": v.salience(item.get("salience"), default_salience),
        "visibility": v.visibility(item.get("visibility") or "tenant"),
        "ts_us": to_us(ts),
        "metadata": v.json_object(item.get("metadata"), "metadata", lim.max_metadata_bytes,
                                  lim.max_metadata_depth),
        "content": text,
        "content_len": len(text),
        "content_hash": content_hash(text),
    }
    key = scoped_idempotency_key(
        v.idempotency_key(item.get("idempotency_key")), str(row["visibility"]), str(row["agent"]))
    row["idempotency_key"] = key
    entities = declared.entities(item.get("entities"))
    relations = declared.relations(item.get("relations"), entities)
    if extract:
        entities = declared.with_extracted(entities, extract_entities(text))
    return PreparedAdd(row, key, entities=entities, relations=relations)
