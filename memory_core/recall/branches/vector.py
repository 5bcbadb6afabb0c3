"""The vector branch of recall under filters: the cheapest exact way to the filtered top-N.

A metadata-filtered Chroma query scans the filter's clauses over the whole collection
(400-900 ms at 100k rows), so a filtered recall is answered, in order of preference, by:

1. ``overfetch``: when the filter's estimated share of the tenant (the smallest of the
   session's rows and the per-tenant type/agent/channel/source-prefix counts of the graph
   store) means a pool of admitted rows lies within
   :data:`OVERFETCH_MAX` pools of nearest rows, an unfiltered query for that many,
   post-filtered on the graph node. The admitted rows of the unfiltered top-M are the first
   rows of the filtered ranking, so when a pool of them survive they *are* the filtered top-N;
2. ``ids``: otherwise the graph lists every row the filter admits (at most :data:`IDS_MAX`;
   any number for a ``source_id`` prefix, which no Chroma ``where`` expresses) and the
   query runs over exactly those ids (Chroma scores a few hundred exactly, in numpy);
3. ``where``: when no index narrows the filter (a project alone), Chroma's filtered scan.

Every path keeps the rule that a filter applies before the top-N cut. A day the question names
brings that day's rows into the same list (:mod:`.dated`). In fusion a row's cosine counts min-max
scaled over the list (:func:`vector_scale`), times the branch's weight.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from graph.api import GraphStore
from memory_core.errors import StoreError
from memory_core.recall.branches import dated
from memory_core.recall.branches.api import Ask, Hit, Ranked
from memory_core.recall.filters import RecallFilters
from memory_core.recall.pool import VECTOR
from memory_core.recall.presets import RecallConfig
from memory_core.recall.scoring import COSINE_FLOOR
from memory_core.refs import EPISODE, episode_ref, memory_ref, parse_ref
from memory_core.vectors.api import VectorHit, VectorStore

if TYPE_CHECKING:
    from memory_core.recall.pool import Pool

NAME = VECTOR  # also its list's name
EMBEDDED = True

IDS_MAX = 50_000  # admitted rows listed for an ids= query rather than a metadata scan
OVERFETCH_MAX = 12  # an unfiltered over-fetch asks for at most this many pools
UNKNOWN_SHARE = 0.5  # the share assumed for a project filter (no index measures it)


def _sizes(graph: GraphStore, f: RecallFilters) -> list[tuple[int, str, str]]:
    """(rows, field, value) of each indexed field the filter sets."""
    tenant = f.tenant
    out = []
    if f.session:
        out.append((graph.count(tenant, f.session), "session", f.session))
    for field in ("type", "agent", "channel"):
        if value := getattr(f, field):
            out.append((graph.field_count(tenant, field, value), field, value))
    if f.source_prefix:
        out.append((graph.source_prefix_count(tenant, f.source_prefix), "source", f.source_prefix))
    return out


def admitted_ids(graph: GraphStore, f: RecallFilters, limit: int | None = IDS_MAX) -> list[str] | None:
    """Refs of every row (memories and episodes) the filter admits, or None when the graph cannot
    enumerate them (no indexed field is set, or the smallest index holds over ``limit``)."""
    tenant = f.tenant
    sizes = _sizes(graph, f)
    if not sizes:
        return None
    size, field, value = min(sizes)
    if limit is not None and size > limit:
        return None
    if field == "session":
        ids = [k[1] for k in graph.page(tenant, value, None, size + 1)]
    elif field == "source":
        ids = graph.source_prefix_ids(tenant, value, None)
    else:
        ids = graph.field_ids(tenant, field, value, None)
    nodes = graph.memories(tenant, ids)
    out = [memory_ref(i) for i in ids if (a := nodes.get(i)) is not None and f.admits(a)]
    episodes = _admitted_episodes(graph, f)
    if episodes is None:
        return None
    return out + episodes


def _admitted_episodes(graph: GraphStore, f: RecallFilters) -> list[str] | None:
    """Refs of the episodes the filter admits; None when they cannot be enumerated cheaply."""
    if f.agent or (f.source_prefix and not f.channel) or (f.type and f.type != "episode"):
        return []  # admits_episode refuses every episode
    if f.session:
        sessions = {f.session}
    elif f.channel:
        sessions = graph.sessions_in_channel(f.tenant, f.channel)
    else:
        return None  # type=episode alone: every session's episode
    out = []
    for session in sorted(sessions):
        ep = graph.session_episode(f.tenant, session)
        if ep is not None and f.admits_episode(ep, graph.session_has_channel):
            out.append(episode_ref(ep.id))
    return out


def share(graph: GraphStore, f: RecallFilters) -> float:
    """The filter's estimated share of the tenant's rows (the smallest indexed one)."""
    total = max(1, graph.count(f.tenant))
    shares = [UNKNOWN_SHARE] if f.project is not None else [1.0]
    shares += [rows / total for rows, _field, _value in _sizes(graph, f)]
    return min(shares)


def _kept(graph: GraphStore, f: RecallFilters, hits: list[VectorHit]) -> list[VectorHit]:
    refs = [parse_ref(h.id) for h in hits]
    nodes = graph.memories(f.tenant, [r.id for r in refs if r.kind != EPISODE])
    out = []
    for hit, ref in zip(hits, refs, strict=True):
        if ref.kind == EPISODE:
            ep = graph.episode(f.tenant, ref.id)
            ok = ep is not None and f.admits_episode(ep, graph.session_has_channel)
        else:
            ok = (a := nodes.get(ref.id)) is not None and f.admits(a)
        if ok:
            out.append(hit)
    return out


def filtered_hits(
    graph: GraphStore, vectors: VectorStore, f: RecallFilters, embedding: Sequence[float], pool: int,
) -> tuple[list[VectorHit], str]:
    """The vector pool under ``f`` and the path that produced it (``unfiltered``, ``overfetch``,
    ``ids`` or ``where``). The graph store locks each read itself; Chroma holds no graph lock."""
    where = f.chroma_where()
    if where is None and not f.source_prefix:
        return vectors.query(f.tenant, embedding, pool), "unfiltered"
    fraction = share(graph, f)
    wanted = int(pool / max(fraction, 1e-9) * 1.5) + 1
    if wanted <= pool * OVERFETCH_MAX:  # a broad filter: its rows are among the nearest anyway
        hits = vectors.query(f.tenant, embedding, wanted)
        kept = _kept(graph, f, hits)
        if len(kept) >= pool or len(hits) < wanted:  # enough, or the whole collection seen
            return kept[:pool], "overfetch"
    # no where expresses a source_id prefix: its admitted rows are listed, however many
    ids = admitted_ids(graph, f, None if f.source_prefix else IDS_MAX)
    if ids is not None:
        return (vectors.query(f.tenant, embedding, min(pool, len(ids)), ids=ids) if ids else []), "ids"
    return vectors.query(f.tenant, embedding, pool, where), "where"


def wanted(cfg: RecallConfig) -> bool:
    """Whether the query is embedded and searched at all (reciprocal-rank fusion reads the ranks alone)."""
    return cfg.vector.weight > 0 or cfg.fusion.method == "rrf"


def search(ask: Ask) -> list[Ranked]:
    """The vector pool under the filters, and the nearest rows of a day the query names. A failing vector
    store costs only this branch: recall answers from the others (said in the diagnostics)."""
    assert ask.embedding is not None
    # the pool does not grow with ``limit`` up to its size: min-max scaling and neighbour joins over a
    # wider pool would reorder the best rows
    pool = min(ask.window, max(ask.cfg.vector.pool, ask.limit))
    on_day = dated.search(ask.workers, ask.graph, ask.vectors, ask.filters, ask.reading, ask.embedding, ask.cfg)
    hits: list[VectorHit] = []
    cut = False
    try:
        hits, path = filtered_hits(ask.graph, ask.vectors, ask.filters, ask.embedding, pool)
        ask.diagnostics["vector_path"] = path
        cut = len(hits) >= pool  # the dated rows below are not part of the pool's scale
        hits += dated.joined(on_day, hits, ask.diagnostics)
    except StoreError as exc:  # a hung, down or failing Chroma: answer from the lexical side
        ask.diagnostics["vector_search"] = f"unavailable: {exc.message}"
    return [Ranked(VECTOR, [_hit(h) for h in hits], cut=cut, label="cosine")]


def _hit(hit: VectorHit) -> Hit:
    ref = parse_ref(hit.id)  # memories and episodes share one id space
    return Hit(ref.id, 1.0 - hit.distance, episode=ref.kind == EPISODE)


def vector_scale(cosines: list[float], cut: bool) -> tuple[float, float]:
    """(lo, span) for min-max over the vector pool. When the pool holds the whole (filtered)
    tenant (it was not ``cut``), its worst row is not a reference point, so ``lo`` drops to the cosine floor."""
    if not cosines:
        return 0.0, 1.0
    lo, hi = min(cosines), max(cosines)
    if not cut:
        lo = min(lo, COSINE_FLOOR)
    return lo, max(hi - lo, 1e-9)


def fuse(pool: Pool) -> None:
    """Adds ``vector.weight`` × the cosine min-max scaled over the pool (``Candidate.vec``) to each row's base."""
    found = pool.lists.get(VECTOR)
    cands = pool.cands.values()
    lo, span = vector_scale([cos for c in cands if (cos := c.cosine) is not None], found is not None and found.cut)
    weight = pool.cfg.vector.weight
    for c in cands:
        cos = c.cosine
        v = c.vec = max(0.0, (cos - lo) / span) if cos is not None else 0.0
        c.base += weight * v
