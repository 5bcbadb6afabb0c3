"""The entity values of the graph store's seam (re-exported by :mod:`graph.api`): what an ENTITY
node, a declaration and a RELATED edge look like, and the key names resolve by."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

SHARED_VIEW = ""  # an alias_seen row for '' : a shared memory declared the name, every agent may see it
PRIVATE_KEY_SEP = "\x1f"  # never in a normalised name (whitespace to str.split) nor in an agent id


def ent_node(entity_id: int) -> str:
    return f"ent:{entity_id}"


def entity_norm(name: str) -> str:
    """The key an entity name or alias resolves by: NFC, case-folded, inner whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFC", name).casefold().split())


def private_key(agent: str, norm: str) -> str:
    """The alias key of a name only ``agent`` may read, once a plain key had to make way."""
    return f"{agent}{PRIVATE_KEY_SEP}{norm}"


def name_keys(norm: str, viewer: str | None, *, shared_first: bool = False) -> list[str]:
    """The alias keys a viewer resolves ``norm`` through, in order of preference."""
    if not viewer:
        return [norm]
    return [norm, private_key(viewer, norm)] if shared_first else [private_key(viewer, norm), norm]


def resolve_key(found: Mapping[str, tuple[int, frozenset[str]]], norm: str, viewer: str | None, *,
                shared_first: bool = False) -> int | None:
    """The entity ``norm`` names for ``viewer`` (None: shared names only), through a key it may
    read: its own private key, then the plain key (``shared_first``: the other way round)."""
    for key in name_keys(norm, viewer, shared_first=shared_first):
        held = found.get(key)
        if held is not None and (key != norm or SHARED_VIEW in held[1] or (viewer is not None and viewer in held[1])):
            return held[0]
    return None


@dataclass(frozen=True, slots=True)
class EntitySpec:
    """An entity as a writer declares it (validated by the service; ``aliases`` exclude ``name``)."""

    name: str
    kind: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class RelationSpec:
    """A RELATED edge as declared: both ends are entity names or aliases (resolved like names)."""

    src: str
    dst: str
    label: str


@dataclass(frozen=True, slots=True)
class EntityNode:
    """An ENTITY node as the read's viewer sees it: its display name, kind, the aliases the viewer
    may read (the name first; an alias only an agent's private memories declared is that agent's
    alone) and how many memories visible to the viewer mention it."""

    id: int
    tenant: str
    name: str
    kind: str | None
    aliases: tuple[str, ...]
    created_us: int
    mentions: int

    @property
    def ref(self) -> str:
        return ent_node(self.id)


def unique_aliases(aliases: Iterable[str]) -> tuple[str, ...]:
    """Aliases in order, one per normal form: a name its author's private key and a shared memory
    both hold (graph.entity_link) is listed once, at its first place."""
    seen: set[str] = set()
    out = []
    for alias in aliases:
        norm = entity_norm(alias)
        if norm not in seen:
            seen.add(norm)
            out.append(alias)
    return tuple(out)


def display_name(entity_id: int, visible_aliases: Sequence[str]) -> str:
    """An entity's name for one viewer: the first alias it may read, else its ref."""
    return visible_aliases[0] if visible_aliases else ent_node(entity_id)


def display_names(ids: Iterable[int], visible_aliases: Mapping[int, Sequence[str]]) -> dict[int, str]:
    """Each entity's name as :func:`entity_node` gives it."""
    return {i: display_name(i, visible_aliases.get(i, ())) for i in ids}


def entity_node(entity_id: int, tenant: str, kind: str | None, visible_aliases: tuple[str, ...], created_us: int,
                mentions: int) -> EntityNode:
    """An entity as one viewer sees it: only the aliases it may read (in order), the first of them
    its display name (the ref when it may read none, e.g. a store restored without alias views)."""
    return EntityNode(entity_id, tenant, display_name(entity_id, visible_aliases), kind, visible_aliases, created_us,
                      mentions)


@dataclass(frozen=True, slots=True)
class EntityRelation:
    """One RELATED edge ``src -[label]-> dst`` and the memory that declared it."""

    src: int
    dst: int
    label: str
    mem_id: int


@dataclass(frozen=True, slots=True)
class EntityRecord:
    """Everything stored about one entity, for export/import (not viewer-filtered)."""

    id: int
    name: str
    kind: str | None
    aliases: tuple[str, ...]
    created_us: int
