"""How often LoCoMo's evidence turns share an extracted entity — with the question, with each other.

    python -m bench.quality.entities.overlap [--data ../shared/data/locomo_dev.json]

Measured before any storage exists, to decide what an entity branch of recall can do. Turn
entities come from ``extract_entities`` over the turn's own text (without the "speaker:"
prefix: the speaker is the row's agent, which recall already matches), keyed by the
normalised name. Per category:

- ``q∩any``: the question names an entity at least one evidence turn mentions;
- ``q∩all``: ... every evidence turn mentions one of the question's entities;
- ``ev pair``: (questions with ≥ 2 evidence turns) two evidence turns share an entity;
- ``hop1 hit`` / ``hop2 hit``: an evidence turn is among the turns that mention a question
  entity (hop 1), or share a non-question entity with such a turn (hop 2, entities mentioned by
  at most ``--max-df`` of the conversation's turns);
- ``hop1 n`` / ``hop2 n``: the median size of those pools (what the branch would add);
- ``rand pair``: two random turns of the same conversation share an entity (the base rate).
"""

from __future__ import annotations

import argparse
import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from bench.common import print_table
from bench.data.locomo import CATEGORY_NAMES, load_locomo
from memory_core.entities.extract import extract_entities


def keys(text: str) -> set[str]:
    return {e.key for e in extract_entities(text)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/locomo_dev.json"))
    parser.add_argument("--max-df", type=float, default=0.05, help="hop-2 entities: at most this share of turns")
    args = parser.parse_args(argv)
    rows: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    rng = random.Random(7)
    rand_pairs: list[float] = []
    for conv in load_locomo(args.data):
        ents = {t.source_id: keys(t.text) for t in conv.turns}
        mentions: dict[str, set[str]] = defaultdict(set)
        for sid, ks in ents.items():
            for k in ks:
                mentions[k].add(sid)
        cap = max(2, int(args.max_df * len(conv.turns)))
        sids = list(ents)
        for _ in range(2000):
            a, b = rng.sample(sids, 2)
            rand_pairs.append(float(bool(ents[a] & ents[b])))
        for qa in conv.qa:
            q = keys(qa.question)
            ev = [ents.get(s, set()) for s in qa.evidence]
            r = rows[qa.category]
            r["q∩any"].append(float(any(q & e for e in ev)))
            r["q∩all"].append(float(all(q & e for e in ev)))
            if len(ev) >= 2:
                r["ev pair"].append(float(any(ev[i] & ev[j] for i in range(len(ev)) for j in range(i + 1, len(ev)))))
            hop1 = {s for k in q if len(mentions.get(k, ())) <= cap for s in mentions.get(k, ())}
            hop2 = {s2 for s in hop1 for k in ents[s] - q if len(mentions[k]) <= cap for s2 in mentions[k]} - hop1
            gold = set(qa.evidence)
            r["hop1 hit"].append(float(bool(gold & hop1)))
            r["hop2 hit"].append(float(bool(gold & (hop1 | hop2))))
            r["hop1 n"].append(len(hop1))
            r["hop2 n"].append(len(hop2))
            r["q ents"].append(float(bool(q)))
    cols = ["q ents", "q∩any", "q∩all", "ev pair", "hop1 hit", "hop2 hit", "hop1 n", "hop2 n"]
    table = []
    for cat in sorted(rows):
        r = rows[cat]
        cells = [f"{statistics.median(r[c]):.0f}" if c.endswith(" n") else f"{statistics.fmean(r[c]):.2f}"
                 if r[c] else "-" for c in cols]
        table.append([f"cat{cat} {CATEGORY_NAMES.get(cat, '')}", len(r["q∩any"]), *cells])
    print_table(f"evidence turns and extracted entities (hop entities: ≤ {args.max_df:.0%} of turns)",
                ["category", "n", *cols], table)
    print(f"\nrandom pair of turns of one conversation sharing an entity: {statistics.fmean(rand_pairs):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
