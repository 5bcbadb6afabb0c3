"""The entity branch of recall: memories that mention what the query names, and one hop further.

Two steps, both inside the tenant and seen by the viewer (every row joins under the same
filter checks as any candidate):

1. **query entities** (:meth:`EntityBranch.find`, run beside the lexical branch while the
   query is embedded): the query's extracted entities and its runs of 2..3 content words or
   single words with a digit or punctuation (so "payments api" and "ledger-svc" match written
   lower-case; one plain lower-case word is not: a capitalised sentence start elsewhere made
   "Research" an entity, and "research" in a query must not pull those) are looked up by name in the
   tenant's entity table — at most ``MAX_LOOKUPS`` lookups, O(query) whatever the number of
   entities. Agents the query names are skipped: the speaker signal has them, and the rows
   that *mention* a speaker are mostly the other side of the dialogue. Each matched entity
   pulls in the (newest ``entity_pool``) memories that mention it; a row's raw score is the mean,
   over the query's entities, of ``weight²`` for those it mentions, with the weight the inverse
   document frequency ``log(N / df) / log(N)``: an entity one memory in a hundred mentions counts
   about a quarter as much as a unique one, one the whole tenant mentions not at all (squared:
   a nickname the dialogue uses every few turns, "Mel", must not lift all of them).
2. **one hop** (:meth:`EntityBranch.join_hops`, after the base scores): the best
   ``entity_seeds`` rows of the pool (whatever retriever found them, the entity branch
   included) lend ``entity_hop`` × their base × the shared entity's weight to memories that
   share a *rare* entity with them (mentioned by at most ``entity_hop_df`` of the tenant, and
   at most ``entity_pool`` memories) — entity → memory → entity → memory. On LoCoMo dev two
   evidence turns of one question share such an entity 85 times as often as two random turns
   of the conversation (``bench.entity_overlap``).

The contributions land in ``Candidate.entity`` (added to ``base`` and ``graph``) and
``Candidate.entities`` (the names that carried it), which ``match_reason`` reports.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from graph.api import EntityNode, MemoryNode
from memory_core.entities.extract import extract_entities, normalise_name
from memory_core.recall.filters import RecallFilters
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import STOPWORDS, QueryReading
from memory_core.recall.scoring import Candidate

MAX_LOOKUPS = 24  # name lookups per query
MAX_RUN = 3  # words in a looked-up run of the query
_TOKEN = re.compile(r"[\w'’.@/-]+")


class EntityReads(Protocol):
    """What the branch reads of the graph store (the entity part of :class:`GraphStore`)."""

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None: ...
    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]: ...
    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]: ...
    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None: ...
    def memories(self, tenant: str, ids: Iterable[int]) -> dict[int, MemoryNode]: ...
    def contents(self, tenant: str, ids: Iterable[int]) -> dict[int, str]: ...
    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int: ...


@dataclass
class EntityHits:
    """What step 1 found: per memory its raw score and the entity names behind it."""

    scores: dict[int, float] = field(default_factory=dict)
    names: dict[int, list[str]] = field(default_factory=dict)
    matched: list[str] = field(default_factory=list)  # the query's entities, as stored
    lookups: int = 0


def query_names(query: str, skip: frozenset[str]) -> list[str]:
    """The names to look up for ``query``: its extracted entities first, then runs of 1..3 content
    words; agents in ``skip`` (case-folded) left out; at most ``MAX_LOOKUPS``, without repeats."""
    out: dict[str, str] = {}
    for e in extract_entities(query):
        if e.kind != "date" and e.key not in skip:
            out.setdefault(e.key, e.name)
    tokens = [t.strip(".'’") for t in _TOKEN.findall(query)]
    for i in range(len(tokens)):
        for n in range(1, MAX_RUN + 1):
            run = tokens[i:i + n]
            if len(run) < n or not run[0] or not run[-1]:
                break
            first, last = run[0].casefold(), run[-1].casefold()
            if first in STOPWORDS or last in STOPWORDS or (n == 1 and (len(first) < 3 or first.isalpha())):
                continue  # one plain word is looked up only as the extractor reads it (a capitalised name)
            key = normalise_name(" ".join(run))
            if key not in skip:
                out.setdefault(key, " ".join(run))
        if len(out) >= MAX_LOOKUPS:
            break
    return list(out.values())[:MAX_LOOKUPS]


def weight(df: int, n: int) -> float:
    """Inverse document frequency on 0..1: 1 for an entity one memory mentions, 0 for one all do."""
    if n <= 1 or df <= 0:
        return 1.0
    return max(0.0, math.log(n / df) / math.log(n))


class EntityBranch:
    """Recall's entity branch over one graph store."""

    def __init__(self, graph: EntityReads) -> None:
        self.graph = graph

    def find(self, filters: RecallFilters, reading: QueryReading, cfg: RecallConfig) -> EntityHits:
        """Step 1: the memories that mention the entities the query names (raw score = the mean over
        the query's entities of weight² for those the memory mentions: a common entity lends little)."""
        hits = EntityHits()
        if cfg.w_entity <= 0 or not reading.text.strip():
            return hits
        g, tenant, viewer = self.graph, filters.tenant, filters.viewer
        skip = frozenset(name.casefold() for name in reading.named)
        found: dict[int, tuple[EntityNode, float]] = {}
        total = max(1, g.count(tenant))
        for name in query_names(reading.text, skip):
            hits.lookups += 1
            node = g.entity_by_name(tenant, name, viewer)
            if node is not None and node.id not in found and node.mentions:
                found[node.id] = (node, weight(node.mentions, total))
        if not found:
            return hits
        hits.matched = [n.name for n, _w in found.values()]
        mentions = g.entity_mentions(tenant, list(found), viewer, cfg.entity_pool)
        for ent_id, mem_ids in mentions.items():
            node, w = found[ent_id]
            for mem_id in mem_ids:
                hits.scores[mem_id] = hits.scores.get(mem_id, 0.0) + w * w / len(found)
                hits.names.setdefault(mem_id, []).append(node.name)
        return hits

    @staticmethod
    def join(cands: dict[int, Candidate], hits: EntityHits) -> None:
        """Step 1's memories join the pool (the caller's admission checks then apply to them)."""
        for rank, (mem_id, score) in enumerate(sorted(hits.scores.items(), key=lambda kv: -kv[1])):
            c = cands.setdefault(mem_id, Candidate(mem_id))
            c.entity_raw = score
            c.entities = tuple(hits.names[mem_id])
            c.ranks["entity"] = rank

    @staticmethod
    def score(cands: dict[int, Candidate], cfg: RecallConfig) -> None:
        """Adds ``w_entity`` × raw share to each step-1 row's base (after the retrievers' base)."""
        for c in cands.values():
            if c.entity_raw:
                bonus = cfg.w_entity * c.entity_raw
                c.entity += bonus
                c.base += bonus
                c.graph += bonus

    def join_hops(self, cands: dict[int, Candidate], attrs: dict[int, MemoryNode], filters: RecallFilters,
                  cfg: RecallConfig) -> int:
        """Step 2: memories sharing a rare entity with the best rows lend them ``entity_hop`` of their
        base; absent ones join the pool under the filter checks. Returns how many joined."""
        if cfg.entity_hop <= 0 or cfg.entity_seeds <= 0 or not cands:
            return 0
        g, tenant, viewer = self.graph, filters.tenant, filters.viewer
        seeds = sorted((c for c in cands.values() if not c.episode and c.base > 0), key=lambda c: -c.base)
        seeds = seeds[:cfg.entity_seeds]
        if not seeds:
            return 0
        total = max(1, g.count(tenant))
        cap = max(2, int(cfg.entity_hop_df * total))
        of_seed = g.memory_entities(tenant, [c.id for c in seeds])
        ent_ids = {e for c in seeds for e in of_seed.get(c.id, ())}
        if not ent_ids:
            return 0
        mentions = g.entity_mentions(tenant, ent_ids, viewer, min(cap, cfg.entity_pool) + 1)
        rare = {e: ids for e, ids in mentions.items() if 1 < len(ids) <= min(cap, cfg.entity_pool)}
        lent: dict[int, tuple[float, int, int]] = {}  # memory -> (bonus, seed, entity)
        for seed in seeds:
            for e in of_seed.get(seed.id, ()):
                ids = rare.get(e)
                if ids is None:
                    continue
                bonus = cfg.entity_hop * seed.base * weight(len(ids), total)
                for mem_id in ids:
                    if mem_id != seed.id and bonus > lent.get(mem_id, (0.0, 0, 0))[0]:
                        lent[mem_id] = (bonus, seed.id, e)
        fresh = [m for m in lent if m not in cands]
        nodes = g.memories(tenant, fresh)
        admitted = {m for m in fresh if (a := nodes.get(m)) is not None and filters.admits(a)}
        if filters.excludes and admitted:
            contents = g.contents(tenant, list(admitted))
            admitted = {m for m in admitted if m in contents and not filters.excluded(contents[m])}
        names = self._names(tenant, viewer, {e for _b, _s, e in lent.values()})
        joined = 0
        for mem_id, (bonus, seed_id, e) in lent.items():
            if mem_id in cands and not cfg.entity_hop_rerank:
                continue
            if mem_id not in cands:
                if mem_id not in admitted:
                    continue
                attrs[mem_id] = nodes[mem_id]
                cands[mem_id] = Candidate(mem_id, dialogue=nodes[mem_id].type == "turn")
                joined += 1
            c = cands[mem_id]
            c.entity += bonus
            c.base += bonus
            c.graph += bonus
            c.entity_via = seed_id
            if (name := names.get(e)) is not None and name not in c.entities:
                c.entities = (*c.entities, name)
        return joined

    def _names(self, tenant: str, viewer: str | None, ent_ids: set[int]) -> dict[int, str]:
        return {e: node.name for e in ent_ids if (node := self.graph.entity(tenant, e, viewer)) is not None}
