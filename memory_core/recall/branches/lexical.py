"""The lexical branch: BM25 over the tenant's own full-text indexes, and exact keyword phrases.

Two lists, each with the recall filters inside the graph store's query (``graph.sqlite.lexical``,
``graph.pg.lexical``):

- ``bm25``: BM25 over each memory's window (its text plus the previous memory of its session); each
  hit also carries the BM25 of the memory's own text from the same match (``Hit.turn``). In tenants
  holding other kinds of memory than dialogue turns, the rows ranked by their own text join after
  the window's: a note, decision or event is matched on its own text (its predecessor is unrelated);
- ``keyword``: exact multi-word phrases of the query (``EXP-30`` → ``"exp 30"``, quoted strings) in the
  memory's own text, for the tokens an embedder blurs (ids, code identifiers, numbers, names).

In fusion a dialogue turn gains ``window`` × its window BM25 + ``turn`` × its own-text BM25, another row
``own`` × its own-text BM25 (each over the list's best), times how much of the query the branch's best
rows hold (:func:`share`, adaptive fusion); a keyword hit ``keyword.weight`` × its score over the best.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from graph.api import LexicalHit
from memory_core.recall.branches.api import Ask, Hit, Ranked
from memory_core.recall.fusion import best
from memory_core.recall.pool import BM25, KEYWORD
from memory_core.recall.presets import RecallConfig
from memory_core.recall.query import STEM, WORD, stems

if TYPE_CHECKING:
    from memory_core.recall.pool import Pool

NAME = "lexical"
EMBEDDED = False
COVERAGE_ROWS = 10  # the best own-text rows whose words tell how much of the query the branch holds

# candidate tokens for keywords; kept when identifier-like (digit, inner '_-.:/#', inner capital)
KEYWORD_TOKEN = re.compile(r"\w[\w.\-:/#]*\w|\w", re.UNICODE)
QUOTED = re.compile(r"\"([^\"]{2,200})\"|'([^']{2,200})'")


def keyword_phrases(query: str) -> list[str]:
    """Quoted strings and identifier-like tokens (``EXP-30``, ``user_id``, ``v2.5.1``, ``4096``)."""
    phrases: list[str] = [a or b for a, b in QUOTED.findall(query)]
    for token in KEYWORD_TOKEN.findall(query):
        inner = token[1:-1]
        if any(c.isdigit() for c in token) or any(c in "_-.:/#" for c in inner) or any(c.isupper() for c in inner):
            phrases.append(token)
    out: dict[str, None] = {}
    for phrase in phrases:
        words = WORD.findall(phrase.lower())
        if words:
            out.setdefault(" ".join(words), None)
    return list(out)


def wanted(cfg: RecallConfig) -> bool:
    return True  # each list checks its own weight; the rows' nodes are read ahead either way


def search(ask: Ask) -> list[Ranked]:
    """Window BM25 (and own-text BM25 in tenants that hold more than turns) and keyword phrases."""
    g, filters, cfg = ask.graph, ask.filters, ask.cfg
    bm25: list[LexicalHit] = []
    keywords: list[LexicalHit] = []
    if cfg.lexical.window > 0 or cfg.lexical.turn > 0:
        pool = min(ask.window, cfg.lexical.pool)
        # rows that are not dialogue turns key on their own text: their best may sit outside the window's pool
        if g.non_turn_count(filters.tenant):
            bm25, own = g.lexical_windows(filters, ask.reading.terms, pool)
            seen = {h.id for h in bm25}
            bm25 += [h for h in own if h.id not in seen]
        else:
            bm25 = g.lexical_window(filters, ask.reading.terms, pool)
    if cfg.keyword.weight > 0:
        phrases = [p for p in keyword_phrases(ask.reading.text) if " " in p]
        keywords = g.lexical_phrases(filters, phrases, cfg.keyword.pool)
    # their nodes are read here, while the query is still being embedded: the join then finds them in
    # the store's node cache (each read re-checks the tenant). Their session neighbours are not: only
    # a few of them turn out to be needed (see memory_core.recall.neighbours), and on 2 cores this worker's
    # CPU slows the embedding beside it (reading them all here cost recall 0.85 ms at 100k)
    g.memories(filters.tenant, {h.id for h in (*bm25, *keywords)})
    return [Ranked(BM25, [Hit(h.id, h.score, turn=h.turn) for h in bm25], label="bm25"),
            Ranked(KEYWORD, [Hit(h.id, h.score) for h in keywords], label="keyword")]


def cover(pool: Pool) -> None:
    """Stage: the best own-text rows have their text read with the pool's (their words set the query's
    quality, :func:`share` and ``evidence``: a maximum, which weaker rows cannot set)."""
    ranked = sorted((c for c in pool.cands.values() if c.turn), key=lambda c: -(c.turn or 0.0))
    pool.read.update(c.id for c in ranked[:COVERAGE_ROWS])


def coverage(content_words: set[str], terms: list[str]) -> float:
    """Share of the query's words (stem-compared) a row's text holds."""
    return sum(1 for t in terms if t[:STEM] in content_words) / len(terms) if terms else 0.0


def lexical_share(best_coverage: float, cfg: RecallConfig) -> float:
    """How much the lexical branch counts for this query (1 = its full weights): a branch whose
    best rows hold few of the query's words is mostly matching chance words."""
    full, least = cfg.lexical.adaptive_full, cfg.lexical.adaptive_min
    if not full:
        return 1.0
    return min(1.0, max(least, best_coverage / full))


def share(pool: Pool) -> None:
    """Stage (adaptive fusion): the branch counts as much as its best rows cover the query's words."""
    pool.words = {k: stems(pool.texts[k]) for k in pool.read if k in pool.texts and k in pool.cands}
    held = max((coverage(w, pool.reading.terms) for w in pool.words.values()), default=0.0)
    pool.share[NAME] = value = lexical_share(held, pool.cfg)
    pool.diagnostics["lexical_share"] = round(value, 3)


def fuse(pool: Pool) -> None:
    """Adds the window, own-text and keyword BM25, each over its best, to each row's base."""
    cands = pool.cands.values()
    cfg = pool.cfg
    w_window, w_turn = cfg.lexical.window, cfg.lexical.turn
    own = w_window + w_turn if cfg.lexical.own is None else cfg.lexical.own
    portion = pool.share.get(NAME, 1.0)
    w_top = best([c.window or 0.0 for c in cands])
    t_top = best([c.turn or 0.0 for c in cands])
    k_top = best([c.keyword or 0.0 for c in cands])
    w_keyword = cfg.keyword.weight
    for c in cands:
        if c.dialogue:
            lex = w_window * max(0.0, c.window or 0.0) / w_top + w_turn * (c.turn or 0.0) / t_top
        else:  # a note, decision or event is matched on its own text: its predecessor is unrelated
            lex = own * (c.turn or 0.0) / t_top
        c.base += portion * lex
        c.base += w_keyword * max(0.0, c.keyword or 0.0) / k_top
