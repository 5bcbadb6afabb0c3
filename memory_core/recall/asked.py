"""What was asked, under the newest-first rule: relevance judged without what every row of the type says.

Under ``type: "handoff"`` (not ``deep``) relevance admits a handoff and time orders the admitted
ones (:mod:`.order`), so an admitted handoff about other work, being newer, comes first. Two
steps keep the newest handoff *of what was asked* first:

1. :func:`without_common`, before the branches search: the query is read without the words the
   type's rows share: the type's own name ("handoff": every row the filter admits is one) and the
   query's words held by nearly every row the filter admits (``asked.shared_share`` of the newest
   ``asked.sample``). Not merely frequent ones: in a tenant working on one thing, that thing's own
   words are in most of its handoffs (bench.quality.handoffs: at half of them, single-topic stores
   lost their newest handoff a third of the time). Nothing is left out, and nothing narrowed below,
   when the words left would tell no row apart (no row holds them: "latest handoff").
2. :func:`narrow`, after the gate: of the rows that passed, a handoff stays when it matches the
   query nearly as well as the best one (``asked.relative`` of its relevance), or when it reads like
   one of those that match best (``asked.anchor`` of the best relevance; the cosine of the two rows'
   embeddings at least ``asked.link``, on the embedder's scale): a piece of work's latest handoff
   often names the work least ("dead-letter queue reviewed too; next step is the release notes")
   while reading like the ones before it. Another piece of work sharing a word of the query
   ("payments API migration" for "billing queue migration retry worker") matches loosely and reads
   unlike them.

Measured in ``bench.quality.handoffs`` (docs/recall-ordering.md gives the numbers).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from graph.api import GraphStore
from memory_core.embedding.api import embed_query
from memory_core.errors import StoreError
from memory_core.recall.filters import RecallFilters
from memory_core.recall.order import newest_first
from memory_core.recall.pool import Candidate, Pool
from memory_core.recall.presets import AskedConfig
from memory_core.recall.query import STEM, QueryReading, stems
from memory_core.refs import memory_ref, parse_ref

_WORD = re.compile(r"[\w']+", re.UNICODE)


@dataclass(frozen=True)
class Asked:
    """The query as the newest-first rule reads it."""

    reading: QueryReading  # without the words every row of the type says
    common: list[str]  # the stems left out
    telling: bool  # some word of the query tells the type's rows apart (some hold it): :func:`narrow` applies


def without_common(graph: GraphStore, filters: RecallFilters, reading: QueryReading, cfg: AskedConfig) -> Asked:
    """``reading`` without the words every row of ``filters.type`` says (step 1 of the module docstring)."""
    assert filters.type is not None
    own = filters.type[:STEM]
    asked = {t[:STEM] for t in reading.terms}
    if not asked:
        return Asked(reading, [], telling=False)
    ids = graph.field_ids(filters.tenant, "type", filters.type, cfg.sample)
    nodes = graph.memories(filters.tenant, ids)
    admitted = [i for i in ids if (a := nodes.get(i)) is not None and filters.admits(a)]
    held = dict.fromkeys(asked, 0)
    for text in graph.contents(filters.tenant, admitted).values():
        for t in asked & stems(text):
            held[t] += 1
    nearly_all = cfg.shared_share * len(admitted) if len(admitted) >= cfg.min_rows else float("inf")
    shared = {t for t, n in held.items() if t == own or n >= nearly_all}
    telling = [t for t in reading.terms if t[:STEM] not in shared]
    if not any(held[t[:STEM]] for t in telling):  # nothing left would tell a row from another
        return Asked(reading, [], telling=False)
    if not shared:
        return Asked(reading, [], telling=True)
    semantic = " ".join(w for w in _WORD.findall(reading.semantic) if w.lower()[:STEM] not in shared)
    return Asked(replace(reading, terms=telling, semantic=semantic or reading.semantic), sorted(shared), telling=True)


def narrow(pool: Pool) -> None:
    """Stage (newest first, a query that tells the rows apart): the rows that passed the gate narrowed to those
    of what was asked (step 2 of the module docstring). The diagnostics say how many were left out."""
    if pool.fallback is not None or not pool.kept or not pool.telling or not newest_first(pool.filters, pool.deep):
        return
    cfg = pool.cfg.asked
    top = max(c.relevance for _conf, c in pool.kept)
    weak = [c for _conf, c in pool.kept if c.relevance < cfg.relative * top]
    if not weak:
        return
    anchors = sorted((c for _conf, c in pool.kept if c.relevance >= cfg.anchor * top), key=lambda c: -c.relevance)
    assert cfg.link is not None, "resolve_preset gives every embedder a link"
    linked = _close(pool, anchors[:cfg.anchors], weak, cfg.link)
    pool.kept = [(conf, c) for conf, c in pool.kept if c.relevance >= cfg.relative * top or c.id in linked]
    pool.diagnostics["asked_left_out"] = len(weak) - len(linked)


def _close(pool: Pool, anchors: list[Candidate], rows: list[Candidate], link: float) -> set[int]:
    """The ``rows`` whose embedding is within ``link`` cosine of an anchor's (the anchors' texts embedded
    again, in one run; the rows' vectors read from the vector store). A failing vector store links nothing
    (said in the diagnostics)."""
    texts = pool.text([c.id for c in anchors])
    refs = [memory_ref(c.id) for c in rows if not c.episode]
    if not texts or not refs or pool.embedder is None or pool.vectors is None:
        return set()
    out: set[int] = set()
    try:
        for vector in embed_query(pool.embedder, list(texts.values())):
            hits = pool.vectors.query(pool.filters.tenant, vector, len(refs), ids=refs)
            out.update(parse_ref(hit.id).id for hit in hits if 1.0 - hit.distance >= link)
    except StoreError as exc:
        pool.diagnostics["asked_links"] = f"unavailable: {exc.message}"
    return out
