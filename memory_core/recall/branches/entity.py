"""The entity branch of recall: memories that mention what the query names, and one hop further.

Two steps, both inside the tenant and seen by the viewer (every row joins under the same
filter checks as any candidate):

1. **query entities** (:func:`search`, run beside the lexical branch while the query is
   embedded): the query's extracted entities and its runs of 2..3 content words or
   single words with a digit or punctuation (so "payments api" and "ledger-svc" match written
   lower-case; one plain lower-case word is not: a capitalised sentence start elsewhere made
   "Research" an entity, and "research" in a query must not pull those) are looked up by name in the
   tenant's alias table — at most ``MAX_LOOKUPS`` names in one indexed read, O(query) whatever
   the number of entities. Agents the query names are skipped: the speaker signal has them, and the rows
   that *mention* a speaker are mostly the other side of the dialogue. Each matched entity
   pulls in the (newest ``entity.pool``) memories that mention it; a row's raw score is the mean,
   over the query's entities, of ``weight²`` for those it mentions, with the weight the inverse
   document frequency ``log(N / df) / log(N)``: an entity one memory in a hundred mentions counts
   about a quarter as much as a unique one, one the whole tenant mentions not at all (squared:
   a nickname the dialogue uses every few turns, "Mel", must not lift all of them).
2. **one hop** (:func:`hop`, a stage after fusion): the best
   ``entity.seeds`` rows of the pool (whatever retriever found them, the entity branch
   included) lift the memories that share a *rare* entity with them to at least ``entity.hop``
   × their base × the entity's weight (a floor: a row that scores higher on its own keeps its
   score, so the hop reorders no well-matched rows) (mentioned by at most ``entity.hop_df`` of the tenant, and
   at most ``entity.pool`` memories) — entity → memory → entity → memory. On LoCoMo dev two
   evidence turns of one question share such an entity 85 times as often as two random turns
   of the conversation (``bench.quality.entities.overlap``).

In fusion (:func:`fuse`) a step-1 row gains ``entity.weight`` × its raw score. The
contributions land in ``Candidate.entity`` (added to ``base`` and ``graph``) and
``Candidate.entities`` (the names that carried it), which ``match_reason`` reports.
"""

from __future__ import annotations

import re

from graph.api import GraphStore, MemoryNode
from memory_core.entities.extract import extract_entities, normalise_name
from memory_core.entities.related import weight
from memory_core.recall.branches.api import Ask, Hit, Ranked
from memory_core.recall.filters import RecallFilters
from memory_core.recall.pool import ENTITY, Candidate, Pool
from memory_core.recall.presets import EntityConfig, RecallConfig
from memory_core.recall.query import STOPWORDS

MAX_LOOKUPS = 24  # name lookups per query
# an entity weighing less (mentioned by more than N^0.6 of N memories: 46 of 600, 1,000 of 100k) pulls
# nothing in: its share would be under a sixth of a unique entity's, and reading its rows costs O(mentions)
MIN_WEIGHT = 0.4
HOP_ENTITIES_PER_SEED = 8  # a seed's entities the hop reads (one indexed read each)
MAX_RUN = 3  # words in a looked-up run of the query
_TOKEN = re.compile(r"[\w'’.@/-]+")

NAME = "entities"  # its stage; its list is ENTITY
EMBEDDED = False


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


def wanted(cfg: RecallConfig) -> bool:
    return True  # step 1 checks its own weight


def search(ask: Ask) -> list[Ranked]:
    """Step 1: the memories that mention the entities the query names (raw score = the mean over
    the query's entities of weight² for those the memory mentions: a common entity lends little)."""
    g, filters, reading, cfg = ask.graph, ask.filters, ask.reading, ask.cfg.entity
    if cfg.weight <= 0 or not reading.text.strip():
        return []
    tenant, viewer = filters.tenant, filters.viewer
    skip = frozenset(name.casefold() for name in reading.named)
    total = max(1, g.count(tenant))
    names = query_names(reading.text, skip)
    # one indexed read for all names; a name only another agent's private memories declared names nothing
    ids = list(dict.fromkeys(g.entity_ids(tenant, names, viewer).values()))
    if not ids:
        return []
    # an entity's visible mentions counted up to one past the rarity cap (an index count: a hub
    # entity costs cap + 1 index entries, no rows); only the rare ones' newest memories are read
    cap = int(total ** (1.0 - MIN_WEIGHT))
    counts = g.entity_mention_counts(tenant, ids, viewer, cap + 1)
    weights = {e: weight(n, total) for e in ids if 0 < (n := counts.get(e, 0)) <= cap}
    rare = [e for e, w in weights.items() if w >= MIN_WEIGHT]
    shown = g.entity_names(tenant, rare, viewer) if rare else {}
    found = {e: (shown[e], weights[e]) for e in ids if e in shown}
    mentions = g.entity_mentions(tenant, list(found), viewer, cfg.pool) if found else {}
    found = {e: v for e, v in found.items() if e in mentions}  # a mention erased in between
    if not found:
        return []
    scores: dict[int, float] = {}
    carried: dict[int, list[str]] = {}
    for ent_id, mem_ids in mentions.items():
        name, w = found[ent_id]
        for mem_id in mem_ids:
            scores[mem_id] = scores.get(mem_id, 0.0) + w * w / len(found)
            carried.setdefault(mem_id, []).append(name)
    # best first; the pool grows by at most entity.pool rows
    best = sorted(scores.items(), key=lambda kv: -kv[1])[:cfg.pool]
    return [Ranked(ENTITY, [Hit(mem_id, score, names=tuple(carried[mem_id])) for mem_id, score in best])]


def fuse(pool: Pool) -> None:
    """Adds ``entity.weight`` × its raw score to each step-1 row's base."""
    w = pool.cfg.entity.weight
    for c in pool.cands.values():
        hit = c.hits.get(ENTITY)
        if hit is not None:
            c.entities = hit.names
            if hit.score:
                bonus = w * hit.score
                c.entity += bonus
                c.base += bonus
                c.graph += bonus


def hop(pool: Pool) -> None:
    """Stage, step 2: memories sharing a rare entity with the best rows are lifted to ``entity.hop`` × the
    seed's base × the entity's weight when lower; absent ones join the pool under the filter checks.
    Says in the diagnostics how many joined."""
    pool.diagnostics["entity_hop_joined"] = join_hops(pool.graph, pool.cands, pool.attrs, pool.filters,
                                                      pool.cfg.entity)


def join_hops(g: GraphStore, cands: dict[int, Candidate], attrs: dict[int, MemoryNode], filters: RecallFilters,
              cfg: EntityConfig) -> int:
    """Step 2 (:func:`hop`); returns how many rows joined."""
    if cfg.hop <= 0 or cfg.seeds <= 0 or not cands:
        return 0
    tenant, viewer = filters.tenant, filters.viewer
    seeds = sorted((c for c in cands.values() if not c.episode and c.base > 0), key=lambda c: -c.base)
    seeds = seeds[:cfg.seeds]
    if not seeds:
        return 0
    total = max(1, g.count(tenant))
    cap = max(2, int(cfg.hop_df * total))
    of_seed = g.memory_entities(tenant, [c.id for c in seeds])
    of_seed = {m: ents[:HOP_ENTITIES_PER_SEED] for m, ents in of_seed.items()}
    ent_ids = {e for c in seeds for e in of_seed.get(c.id, ())}
    if not ent_ids:
        return 0
    most = min(cap, cfg.pool)
    counts = g.entity_mention_counts(tenant, ent_ids, viewer, most + 1)  # no rows read for the hubs
    mentions = g.entity_mentions(tenant, [e for e in ent_ids if 1 < counts.get(e, 0) <= most], viewer, most)
    rare = {e: ids for e, ids in mentions.items() if 1 < len(ids) <= most}
    lent: dict[int, tuple[float, int, int]] = {}  # memory -> (bonus, seed, entity)
    for seed in seeds:
        for e in of_seed.get(seed.id, ()):
            ids = rare.get(e)
            if ids is None:
                continue
            bonus = cfg.hop * seed.base * weight(len(ids), total)
            for mem_id in ids:
                if mem_id != seed.id and bonus > lent.get(mem_id, (0.0, 0, 0))[0]:
                    lent[mem_id] = (bonus, seed.id, e)
    fresh = [m for m in lent if m not in cands]
    nodes = g.memories(tenant, fresh)
    admitted = {m for m in fresh if (a := nodes.get(m)) is not None and filters.admits(a)}
    if filters.excludes and admitted:
        contents = g.contents(tenant, list(admitted))
        admitted = {m for m in admitted if m in contents and not filters.excluded(contents[m])}
    # a floor, not a sum: a linked row is lifted to entity.hop × its seed's base × the entity's
    # weight when it scores lower on its own; rows that match the query better keep their order
    lifted = {m: v for m, v in lent.items() if (m in cands and cands[m].base < v[0]) or m in admitted}
    names = g.entity_names(tenant, {e for _b, _s, e in lifted.values()}, viewer) if lifted else {}
    joined = 0
    for mem_id, (bonus, seed_id, e) in lifted.items():
        if mem_id not in cands:
            attrs[mem_id] = nodes[mem_id]
            cands[mem_id] = Candidate(mem_id, dialogue=nodes[mem_id].type == "turn")
            joined += 1
        c = cands[mem_id]
        lift = bonus - c.base
        c.entity += lift
        c.base += lift
        c.graph += lift
        c.entity_via = seed_id
        if (name := names.get(e)) is not None and name not in c.entities:
            c.entities = (*c.entities, name)
    return joined
