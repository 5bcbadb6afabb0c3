"""The neighbourhood of an entity or a memory in the entity graph, best first, with its paths.

The graph walked is memory -MENTIONS-> entity (both ways) and entity -RELATED[label]- entity,
everything read as the viewer sees it (an entity only its private memories mention is seen by
that agent alone). The walk is breadth first up to ``depth`` edges; each node keeps the best
path found to it. A path's score is the product of its steps:

- entity -> memory and memory -> entity: the entity's weight ``log(N / df) / log(N)`` (an
  entity half the tenant mentions joins things weakly), never below ``MIN_STEP``;
- entity -RELATED- entity: ``RELATED_STEP`` (a declared relation is a strong link).

An entity expands to its newest ``FANOUT`` memories; at most ``MAX_NODES`` nodes are reached.
The walk never steps onto an older version of a corrected memory (``update_memory``): the
current version carries what is still true, as in recall.
Results: memories (as rows, for previews) and entities, best score first, then fewer hops.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from graph.api import Counts, EntityIndex, EntityNode, MemoryRows, ent_node
from memory_core import validation as v
from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.models import MemoryRow
from memory_core.reads import visible
from memory_core.refs import EPISODE, REF_PATTERN, memory_ref, parse_ref

MAX_DEPTH = 3
MAX_LIMIT = 100
FANOUT = 25
MAX_NODES = 400
MIN_STEP = 0.05
RELATED_STEP = 0.8
MAX_START_CHARS = 256


def weight(df: int, n: int) -> float:
    """Inverse document frequency on 0..1: 1 for an entity one memory mentions, 0 for one all do."""
    if n <= 1 or df <= 0:
        return 1.0
    return max(0.0, math.log(n / df) / math.log(n))


class RelatedGraph(EntityIndex, MemoryRows, Counts, Protocol):
    """What the walk reads of the graph store: entities, their relations, the memories that mention them."""


class RowReader(Protocol):
    def rows(self, tenant: str, ids: Iterable[int], viewer: str | None) -> list[MemoryRow]: ...


@dataclass(frozen=True)
class PathStep:
    """One node of a path: its ref, its name (entities) and the edge that led to it."""

    ref: str
    via: str | None = None  # "MENTIONS", "MENTIONED_BY", "RELATED:<label>"; None for the start
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref}
        if self.via:
            out["via"] = self.via
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True)
class RelatedItem:
    """A memory (``memory`` set) or an entity (``entity`` set) near the start, with its best path."""

    ref: str
    score: float
    depth: int
    path: tuple[PathStep, ...]
    memory: MemoryRow | None = None
    entity: EntityNode | None = None

    @property
    def kind(self) -> str:
        return "memory" if self.memory is not None else "entity"


@dataclass
class RelatedResult:
    start: PathStep
    items: list[RelatedItem] = field(default_factory=list)
    truncated: bool = False  # the walk reached MAX_NODES before its depth


def entity_dict(node: EntityNode) -> dict[str, Any]:
    return {"ref": node.ref, "name": node.name, "kind": node.kind, "aliases": list(node.aliases),
            "mentions": node.mentions}


@dataclass
class _Reached:
    score: float
    depth: int
    path: tuple[PathStep, ...]


def related(graph: RelatedGraph, reader: RowReader, tenant: str, start: object, *, depth: object = 2,
            limit: object = 20, viewer: str | None = None, as_of_us: int | None = None) -> RelatedResult:
    """Memories and entities around ``start`` (an entity name or alias, an ``ent:`` ref, a ``mem:`` ref).
    A memory is walked through while it is valid (now, or at ``as_of_us``), and so is a relation while the
    memory that declared it is."""
    tenant = v.tenant(tenant)
    if isinstance(depth, bool) or not isinstance(depth, int) or not 1 <= depth <= MAX_DEPTH:
        raise InvalidInputError(f"'depth' must be an integer from 1 to {MAX_DEPTH}.", field="depth")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"'limit' must be an integer from 1 to {MAX_LIMIT}.", field="limit")
    walk = _Walk(graph, tenant, viewer, as_of_us)
    first = walk.resolve(start)
    walk.run(first, depth)
    ranked = sorted(((key, r) for key, r in walk.reached.items() if key != first),
                    key=lambda kv: (-kv[1].score, kv[1].depth, kv[0]))[:limit]
    rows = {r.id: r for r in reader.rows(tenant, [k[1] for k, _r in ranked if k[0] == "mem"], viewer)}
    items: list[RelatedItem] = []
    for (kind, item_id), r in ranked:
        if kind == "mem":
            if item_id in rows:
                items.append(RelatedItem(memory_ref(item_id), round(r.score, 4), r.depth, r.path, memory=rows[item_id]))
        elif (node := walk.entities.get(item_id)) is not None:
            items.append(RelatedItem(node.ref, round(r.score, 4), r.depth, r.path, entity=node))
    return RelatedResult(walk.reached[first].path[0], items, walk.truncated)


class _Walk:
    def __init__(self, graph: RelatedGraph, tenant: str, viewer: str | None, as_of_us: int | None = None) -> None:
        self.graph, self.tenant, self.viewer, self.as_of_us = graph, tenant, viewer, as_of_us
        self.total = max(1, graph.count(tenant))
        self.entities: dict[int, EntityNode] = {}
        self.reached: dict[tuple[str, int], _Reached] = {}
        self.truncated = False
        self.current: dict[int, bool] = {}  # memory id -> valid (now: not superseded nor ended; or at as_of)

    def resolve(self, start: object) -> tuple[str, int]:
        if not isinstance(start, str) or not start.strip():
            raise InvalidInputError("'entity' must be an entity name or alias, an 'ent:' ref or a 'mem:' ref.",
                                    field="entity")
        text = start.strip()[:MAX_START_CHARS]
        g = self.graph
        if REF_PATTERN.match(text):
            ref = parse_ref(text)
            if ref.kind == EPISODE:
                raise InvalidInputError("related starts at an entity or a memory, not an episode.", field="entity")
            attrs = g.memory(self.tenant, ref.id)
            if attrs is None or not visible(attrs, self.viewer):
                raise NotFoundError(f"No memory {ref} in this tenant.", ref=str(ref))
            if self.as_of_us is not None and not attrs.valid_at(self.as_of_us):
                raise NotFoundError(f"{ref} was not valid at that instant.", ref=str(ref))
            key = ("mem", ref.id)
            self.reached[key] = _Reached(1.0, 0, (PathStep(str(ref)),))
            return key
        node = None
        if text.startswith("ent:") and text[4:].isdigit():
            node = g.entity(self.tenant, int(text[4:]), self.viewer)
        if node is None:
            node = g.entity_by_name(self.tenant, text, self.viewer)
        if node is None:
            raise NotFoundError(f"No entity {text[:80]!r} in this tenant.", ref=text[:80])
        self.entities[node.id] = node
        key = ("ent", node.id)
        self.reached[key] = _Reached(1.0, 0, (PathStep(node.ref, name=node.name),))
        return key

    def run(self, first: tuple[str, int], depth: int) -> None:
        layer = [first]
        for d in range(1, depth + 1):
            if not layer:
                break
            nxt: list[tuple[str, int]] = []
            mems = [i for k, i in layer if k == "mem"]
            ents = [i for k, i in layer if k == "ent"]
            steps: list[tuple[tuple[str, int], tuple[str, int], str, float]] = []  # (from, to, via, factor)
            if ents:
                for ent_id, mem_ids in self.graph.entity_mentions(self.tenant, ents, self.viewer, FANOUT).items():
                    w = self._weight(ent_id)
                    steps += [(("ent", ent_id), ("mem", m), "MENTIONED_BY", w) for m in mem_ids]
                relations = self.graph.entity_relations(self.tenant, ents, self.viewer)
                self._load_current([rel.mem_id for rel in relations])
                for rel in relations:
                    if not self.current.get(rel.mem_id, False):
                        continue  # declared by a memory not valid (then): the relation is not either
                    for a, b in ((rel.src, rel.dst), (rel.dst, rel.src)):
                        if a in ents:
                            steps.append((("ent", a), ("ent", b), f"RELATED:{rel.label}", RELATED_STEP))
            if mems:
                for mem_id, ent_ids in self.graph.memory_entities(self.tenant, mems).items():
                    steps += [(("mem", mem_id), ("ent", e), "MENTIONS", 0.0) for e in ent_ids]
            self._load([to[1] for _f, to, _v, _w in steps if to[0] == "ent"])
            self._load_current([to[1] for _f, to, _v, _w in steps if to[0] == "mem"])
            for frm, to, via, factor in steps:
                if to[0] == "ent" and to[1] not in self.entities:
                    continue  # not visible to the viewer
                if to[0] == "mem" and not self.current.get(to[1], False):
                    continue  # an older version (update_memory): the current one carries the facts
                if via == "MENTIONS":
                    factor = self._weight(to[1])
                score = self.reached[frm].score * factor
                old = self.reached.get(to)
                if old is not None and old.score >= score:
                    continue
                if old is None and len(self.reached) >= MAX_NODES:
                    self.truncated = True
                    continue
                name = self.entities[to[1]].name if to[0] == "ent" else None
                ref = ent_node(to[1]) if to[0] == "ent" else memory_ref(to[1])
                self.reached[to] = _Reached(score, d, (*self.reached[frm].path, PathStep(ref, via, name)))
                if old is None:
                    nxt.append(to)
            layer = nxt

    def _load(self, ids: list[int]) -> None:
        for e in dict.fromkeys(ids):
            if e not in self.entities and (node := self.graph.entity(self.tenant, e, self.viewer)) is not None:
                self.entities[e] = node

    def _load_current(self, ids: list[int]) -> None:
        todo = [m for m in dict.fromkeys(ids) if m not in self.current]
        if todo:
            nodes = self.graph.memories(self.tenant, todo)
            at = self.as_of_us
            self.current.update({m: m in nodes and (nodes[m].valid_to_us is None if at is None
                                                    else nodes[m].valid_at(at)) for m in todo})

    def _weight(self, ent_id: int) -> float:
        node = self.entities.get(ent_id)
        return max(MIN_STEP, weight(node.mentions if node else self.total, self.total))
