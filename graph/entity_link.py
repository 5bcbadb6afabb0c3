"""How declared entities and relations become rows: the same resolution on every backend.

A backend's transaction supplies the row primitives (:class:`EntityRows`); :func:`link`
decides, once, which entity each declared name resolves to, which entities are new, which
aliases are added (an alias already held by another entity stays with it) and which
MENTIONS and RELATED rows the memory writes.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from graph.api import EntitySpec, RelationSpec, entity_norm
from graph.entity_values import SHARED_VIEW


@dataclass(frozen=True, slots=True)
class Writer:
    """The memory that declares: its id, timestamp and visibility (copied onto its rows)."""

    mem_id: int
    ts_us: int
    shared: bool
    agent: str


class EntityRows(Protocol):
    def lookup_norms(self, tenant: str, norms: Sequence[str]) -> dict[str, int]:
        """Entity ids by normalised alias (only the ones found)."""
    def create_entity(self, tenant: str, name: str, kind: str | None, now_us: int) -> int:
        """A new entity (a fresh id from the shared sequence) without aliases."""
    def add_alias(self, tenant: str, entity_id: int, norm: str, alias: str) -> int:
        """Give the entity this alias unless one holds it already; returns the holder's id."""
    def drop_entity(self, tenant: str, entity_id: int) -> None:
        """Remove an entity created in this transaction that lost its name to a concurrent writer."""
    def fill_kind(self, tenant: str, entity_id: int, kind: str) -> None:
        """Set the kind when the entity has none yet (the first kind declared wins)."""
    def see_aliases(self, tenant: str, viewer: str, norms: Sequence[str]) -> None:
        """Record that these names were declared by a memory ``viewer`` may read (see :func:`seen_by`)."""
    def write_mentions(self, tenant: str, writer: Writer, entity_ids: Sequence[int]) -> None: ...
    def write_relations(self, tenant: str, writer: Writer, rows: Sequence[tuple[int, int, str]]) -> None: ...




def seen_by(writer: Writer) -> str:
    """Who may see the names this memory declares: everyone ('') or only its author.

    Resolution ignores this (a private alias still joins its entity when anyone writes it); reads
    show a viewer only the names and aliases some memory it may read declared.
    """
    return SHARED_VIEW if writer.shared else writer.agent


def display_name(name: str) -> str:
    """How a name or alias is stored and shown: NFC, whitespace collapsed, case kept."""
    return " ".join(unicodedata.normalize("NFC", name).split())


def link(rows: EntityRows, tenant: str, writer: Writer, entities: Sequence[EntitySpec],
         relations: Sequence[RelationSpec], now_us: int) -> list[int]:
    """Resolve, create and write; returns the mentioned entity ids in declaration order."""
    wanted = [entity_norm(n) for e in entities for n in (e.name, *e.aliases)]
    wanted += [entity_norm(n) for r in relations for n in (r.src, r.dst)]
    known = rows.lookup_norms(tenant, list(dict.fromkeys(wanted)))
    mentioned: dict[int, None] = {}

    def resolve(names: Sequence[str], kind: str | None) -> int:
        norms = [entity_norm(n) for n in names]
        entity_id = next((known[n] for n in norms if n in known), None)
        if entity_id is None:
            created = rows.create_entity(tenant, display_name(names[0]), kind, now_us)
            entity_id = rows.add_alias(tenant, created, norms[0], display_name(names[0]))
            if entity_id != created:  # another replica named it first: use theirs
                rows.drop_entity(tenant, created)
            known[norms[0]] = entity_id
        for norm, name in zip(norms, names, strict=True):
            if norm not in known:
                known[norm] = rows.add_alias(tenant, entity_id, norm, display_name(name))
        if kind:
            rows.fill_kind(tenant, entity_id, kind)
        mentioned[entity_id] = None
        return entity_id

    for spec in entities:
        resolve([spec.name, *spec.aliases], spec.kind)
    related: dict[tuple[int, int, str], None] = {}
    for rel in relations:
        src, dst = resolve([rel.src], None), resolve([rel.dst], None)
        if src != dst:
            related[(src, dst, rel.label)] = None
    rows.see_aliases(tenant, seen_by(writer), list(dict.fromkeys(wanted)))
    ids = list(mentioned)
    rows.write_mentions(tenant, writer, ids)
    rows.write_relations(tenant, writer, list(related))
    return ids
