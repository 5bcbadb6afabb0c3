"""One add's arguments validated into a storable row, before any write: its fields, the
entities it declares and the ones the deterministic extractor finds in its text.

Every write path that stores a memory (add, add_memories, handoffs, corrections, imports, doctor's
restores) prepares its rows here, so the secrets guard (:mod:`memory_core.secret_guard`) runs here,
once, on the validated fields and before anything else reads them: the content hash, the
extractor and every store see only the guarded text. Every string the row stores passes it: names
that address rows (refused when one holds a secret), the content, metadata and source (and any hash
in them of a secret or of the clear text), declared entity names, aliases, kinds and relation labels."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from graph.api import EntitySpec, MemoryNode, MemoryRecord, RelationSpec
from memory_core import validation as v
from memory_core.entities import declared
from memory_core.entities.extract import extract_entities
from memory_core.errors import PoisoningRejectedError
from memory_core.models import DEFAULT_SALIENCE, HANDOFF_SALIENCE, to_us
from memory_core.secret_guard import Scan, SecretGuard
from memory_core.secret_guard.findings import MARKER_PATTERN
from memory_core.secret_guard.guard import digests_of
from memory_core.settings.schema import LimitSettings
from memory_core.write import poisoning
from memory_core.write.request import ADD_ITEM_NAMES, AddItem, refuse_unknown
from memory_core.write.rows import content_hash, scoped_idempotency_key


@dataclass(frozen=True)
class ItemRef:
    """Another item of the same add_many call, by its index: an edge or a version link to a row whose
    id is only known once the call assigns it (imports write a version and its predecessor together).
    A link to an item that is not written (its idempotency key answered it) is dropped."""

    position: int


@dataclass
class PreparedAdd:
    row: MemoryRecord  # its node's id is 0 until the write assigns one
    position: int = 0  # its index in the add_many call
    preferred_id: int | None = None  # imports keep their refs when the id is free
    restore: bool = False  # doctor: the record under preferred_id existed before; never delete it
    edges: list[tuple[str, str]] = field(default_factory=list)  # extra (target node, kind) from this memory
    links: list[tuple[str | ItemRef, str]] = field(default_factory=list)  # the same as given (resolved each write)
    supersedes_item: ItemRef | None = None  # a version link to another item of the call
    supersedes: int | None = None  # update_memory: the version this row ends (in the same transaction)
    entities: list[EntitySpec] = field(default_factory=list)  # declared, then extracted (MENTIONS)
    relations: list[RelationSpec] = field(default_factory=list)
    redacted: dict[str, int] = field(default_factory=dict)  # secrets the guard replaced: kind -> count
    duplicate_of: str | None = None  # set by the write: the same content just before in the session
    screen: bool = False  # write-time hygiene screens it (agents' adds; see memory_core.write.hygiene)

    @property
    def idempotency_key(self) -> str | None:
        """The key as stored (scoped: see :func:`memory_core.write.rows.scoped_idempotency_key`)."""
        return self.row.idempotency_key


REDACT = SecretGuard("redact")
PoisoningPolicyOf = Callable[[str], str]  # a tenant's security.poisoning: flag, quarantine or reject


def flag_all(_tenant: str) -> str:
    """The default poisoning policy: every flagged row is stored with its flags."""
    return "flag"


def prepare_add(item: AddItem, limits: LimitSettings, *, extract: bool = True,
                guard: SecretGuard = REDACT, poisoning_of: PoisoningPolicyOf = flag_all) -> PreparedAdd:
    """Validate one add's arguments into the row it stores (no id yet). Raises before any write.
    ``extract``: add the entities the deterministic extractor finds in the text to the declared ones.
    ``guard``: the secrets policy (SECRET_REJECTED under ``reject``; redacted fields under ``redact``).
    ``poisoning_of``: the tenant's poisoning policy (POISONING_REJECTED under ``reject``; the row's flags
    name ``quarantined`` too under ``quarantine``; see :mod:`memory_core.write.poisoning`)."""
    refuse_unknown(item, ADD_ITEM_NAMES, "add_memory")
    lim = limits
    tenant, session = v.tenant(item.get("tenant")), str(v.name(item.get("session"), "session"))
    agent, mtype = str(v.name(item.get("agent"), "agent")), v.stored_type(item.get("type") or "turn")
    role, channel = v.name(item.get("role"), "role", required=False), v.name(item.get("channel"), "channel",
                                                                             required=False)
    project_id, given_key = v.project_id(item.get("project_id")), v.idempotency_key(item.get("idempotency_key"))
    guard.names({"tenant": tenant, "session": session, "agent": agent, "type": mtype, "role": role,
                 "channel": channel, "project_id": project_id, "idempotency_key": given_key},
                "memory")  # SECRET_REJECTED before anything else reads them
    scan = Scan()
    clear = v.content(item.get("content"), lim.max_content_chars)
    text = guard.text(clear, "content", scan)
    # a hash of the clear text, or of a secret in it, is the secret for whoever can hash a guess
    hashed = digests_of([clear, *(clear[x.start:x.end] for x in scan.found)]) if text != clear else frozenset()
    source = v.source(item.get("source"), lim.max_metadata_bytes, lim.max_metadata_depth)
    source = guard.hashes(guard.json(source, "source", scan), hashed, "source", scan)
    metadata = v.json_object(item.get("metadata"), "metadata", lim.max_metadata_bytes, lim.max_metadata_depth)
    metadata = guard.hashes(guard.json(metadata, "metadata", scan), hashed, "metadata", scan)
    ts_us = to_us(v.timestamp(item.get("timestamp")))
    valid_from_us = v.instant_us(item.get("valid_from"), "valid_from")
    review_after_us = v.instant_us(item.get("review_after"), "review_after")
    salience = v.salience(item.get("salience"), HANDOFF_SALIENCE if mtype == "handoff" else DEFAULT_SALIENCE)
    visibility = v.visibility(item.get("visibility") or "tenant")
    provenance = v.provenance(item.get("provenance"), role)
    node = MemoryNode(id=0,  # none yet: the write assigns it (WritePath._assign_ids)
                      tenant=tenant, session=session, agent=agent, type=mtype, role=role, channel=channel,
                      source=source, source_id=source.get("id"), project_id=project_id, salience=salience,
                      visibility=visibility, ts_us=ts_us, metadata=metadata, content_len=len(text),
                      content_hash=content_hash(text), valid_from_us=valid_from_us,
                      review_after_us=review_after_us, provenance=provenance)
    row = MemoryRecord(node, text, scoped_idempotency_key(given_key, visibility, agent))
    declared_entities = _without_redacted_kinds(guard.json(item.get("entities"), "entities", scan))
    declared_relations = guard.json(item.get("relations"), "relations", scan)
    # SECRET_REJECTED here, under "reject": before anything is written, and before a later error could quote a value
    redacted = guard.finish(scan, "memory")
    row = replace(row, node=replace(node, flags=screened(text, poisoning_of(tenant))))
    entities = declared.entities(declared_entities)
    relations = declared.relations(declared_relations, entities)
    if extract:
        entities = declared.with_extracted(entities, extract_entities(text))
    return PreparedAdd(row, entities=entities, relations=relations, redacted=redacted)


def screened(text: str, policy: str) -> tuple[str, ...]:
    """The poisoning scan's flags of ``text`` under ``policy``: POISONING_REJECTED under ``reject`` when it
    found anything; ``quarantined`` added under ``quarantine``."""
    flags = poisoning.scan(text)
    if not flags:
        return ()
    if policy == "reject":
        raise PoisoningRejectedError(
            f"The content addresses a model ({', '.join(flags)}) and this tenant's security.poisoning is "
            "'reject'; nothing was written.", field="content", flags=list(flags))
    return tuple(sorted({*flags, poisoning.QUARANTINED})) if policy == "quarantine" else flags


def _without_redacted_kinds(entities: Any) -> Any:
    """Declared entities with a kind the guard redacted dropped: a kind is a label, and a redaction marker
    is none (the entity is stored without a kind, and the result reports the secret)."""
    if not isinstance(entities, list):
        return entities
    return [{**e, "kind": None} if isinstance(e, dict) and isinstance(e.get("kind"), str)
            and MARKER_PATTERN.search(e["kind"]) else e for e in entities]
