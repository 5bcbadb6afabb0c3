"""How declared entities and relations become rows: the same resolution on every backend.

A backend's transaction supplies the row primitives (:class:`EntityRows`); :func:`link`
decides, once, which entity each declared name resolves to, which entities are new, which
aliases are added (an alias already held by another entity stays with it) and which
MENTIONS and RELATED rows the memory writes.

Names are private until a shared memory declares them. An alias row's key is the name's
normal form (:func:`entity_norm`), and ``alias_seen`` says who may read it: ``''`` (every
agent) and/or the agents whose private memories declared it. A writer resolves a name only
through a key it may read (:func:`resolve_key`): the plain key when it may read that, and its own
private key (``agent\x1fname``) — a shared memory prefers the plain key (the name everyone uses), a
private memory and a read the agent's own. A plain key only other agents may read is moved out
of its way first (:meth:`EntityRows.rekey_private`: one private key per such agent, same entity),
so the writer creates or joins only what it may see: another agent's private entity lends it
no id, kind or spelling, and stays invisible to it (issue 37, point 10).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from graph.api import EntitySpec, RelationSpec, entity_norm
from graph.entity_values import SHARED_VIEW, name_keys, resolve_key


@dataclass(frozen=True, slots=True)
class Writer:
    """The memory that declares: its id, timestamp and visibility (copied onto its rows)."""

    mem_id: int
    ts_us: int
    shared: bool
    agent: str


class EntityRows(Protocol):
    def lookup_keys(self, tenant: str, keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
        """For each alias key found: the entity holding it and who may read it (its ``alias_seen`` viewers)."""
    def rekey_private(self, tenant: str, norm: str) -> None:
        """Move the plain alias key ``norm`` (which no shared memory declared) to the private key of
        each agent that may read it, same entity, alias and position; with no reader, to a key
        nobody resolves. The plain key is then free."""
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
    """Who may see the names this memory declares: everyone ('') or only its author."""
    return SHARED_VIEW if writer.shared else writer.agent


def display_name(name: str) -> str:
    """How a name or alias is stored and shown: NFC, whitespace collapsed, case kept."""
    return " ".join(unicodedata.normalize("NFC", name).split())


def link(rows: EntityRows, tenant: str, writer: Writer, entities: Sequence[EntitySpec],
         relations: Sequence[RelationSpec], now_us: int) -> list[int]:
    """Resolve, create and write; returns the mentioned entity ids in declaration order."""
    wanted = [entity_norm(n) for e in entities for n in (e.name, *e.aliases)]
    wanted += [entity_norm(n) for r in relations for n in (r.src, r.dst)]
    wanted = list(dict.fromkeys(wanted))
    agent = writer.agent
    found = rows.lookup_keys(tenant, [k for n in wanted for k in name_keys(n, agent)])
    for norm in sorted(wanted):  # another agent's private name: not this writer's to join; it makes way (in key order)
        held = found.get(norm)
        if held is not None and not held[1] & {SHARED_VIEW, agent}:
            rows.rekey_private(tenant, norm)
            del found[norm]
    known = {n: e for n in wanted if (e := resolve_key(found, n, agent, shared_first=writer.shared)) is not None}
    plain = {n for n in wanted if n in found}  # plain keys held (by an entity the writer may read)
    mentioned: dict[int, None] = {}

    def claim(entity_id: int, norm: str, name: str) -> int:
        holder = rows.add_alias(tenant, entity_id, norm, display_name(name))
        if holder != entity_id:  # another replica's writer named it first: use theirs, if it is ours to see
            held = rows.lookup_keys(tenant, [norm]).get(norm)
            if held is not None and not held[1] & {SHARED_VIEW, agent}:
                rows.rekey_private(tenant, norm)
                holder = rows.add_alias(tenant, entity_id, norm, display_name(name))
        plain.add(norm)
        return holder

    def resolve(names: Sequence[str], kind: str | None) -> int:
        norms = [entity_norm(n) for n in names]
        entity_id = next((known[n] for n in norms if n in known), None)
        if entity_id is None:
            created = rows.create_entity(tenant, display_name(names[0]), kind, now_us)
            entity_id = claim(created, norms[0], names[0])
            if entity_id != created:  # another replica named it first: use theirs
                rows.drop_entity(tenant, created)
            known[norms[0]] = entity_id
        for norm, name in zip(norms, names, strict=True):
            if norm not in known:
                known[norm] = claim(entity_id, norm, name)
            elif writer.shared and norm not in plain and known[norm] == entity_id:
                claim(entity_id, norm, name)  # its author's private name, declared in a shared memory: published
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
    rows.see_aliases(tenant, seen_by(writer), [n for n in wanted if n in plain])
    ids = list(mentioned)
    rows.write_mentions(tenant, writer, ids)
    rows.write_relations(tenant, writer, list(related))
    return ids
