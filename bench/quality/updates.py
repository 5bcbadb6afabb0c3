"""Facts that change: knowledge-update and as-of questions (issue 49), recalled through ``MemoryCore.recall``.

    python -m bench.quality.updates [--embedder minilm] [--json PATH]

Two sets, each recalled with stale facts stepping aside (the default) and with ``include_stale`` (every row
as it was), side by side:

- **coding corrections**: the coding set (``bench.data.coding``) whose settings then change twice, once
  restated by another agent as a new note (nothing links it to the old one: the stale rule must find it)
  and once corrected with ``update_memory``. Questions: what each setting is now (two wordings).
- **generated sequences**: services whose attributes (region, database, on-call, version) change three
  times a few months apart, among facts about the same services that never change. Half the services
  record each change as a correction dated when it happened (``update_memory`` with ``valid_from``), half
  restate the fact as a new memory with its date (nothing links the two but the service, which every fact
  declares as an entity, as an agent using add_memory's ``entities`` would). Questions: each value now, and
  each value at a date between two changes (``as_of``).

A question's value is found when it is in the first ``DEPTH`` rows at all; it is met when it is found and
ranks above every other value of the same thing shown; "none above" when no other value of the thing
ranks above it (none is shown, when it is not). An as-of question is "only then" when no other
value of the thing is shown at all: what the store's validity alone gives (exact for corrections; a
restated fact is never ended, so its older values stay valid and can only rank below). The marks are
checked too: a ``possibly_stale`` row whose ``newer`` is about another attribute is a false mark. The
cosine table shows where the thresholds of ``stale`` sit (pairs of one attribute's values vs pairs of one
service's different attributes) on the embedder used.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.data.coding import SETTINGS, generate
from bench.latency.embed_cache import cached_embedder
from memory_core import MemoryCore
from memory_core.recall.presets import StaleConfig

TENANT = "updates"
DEPTH = 10
T0 = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
SERVICES = ["payments-api", "ledger-svc", "search-indexer", "auth-gateway", "notify-worker", "report-builder",
            "export-runner", "billing-cron"]
ATTRIBUTES = {  # attribute: (how a fact says it, how it is asked, the values it takes)
    "region": ("{svc} is deployed in region {v}.", "Which region is {svc} deployed in?",
               ["eu-west-1", "eu-west-2", "us-east-1", "eu-central-1", "ap-south-1"]),
    "database": ("The primary database of {svc} is {v}.", "What is the primary database of {svc}?",
                 ["Postgres 13", "Postgres 15", "Postgres 16", "CockroachDB 23", "MySQL 8"]),
    "oncall": ("The on-call engineer for {svc} is {v}.", "Who is on call for {svc}?",
               ["Dana", "Priya", "Marco", "Ingrid", "Tomás", "Aiko"]),
    "version": ("{svc} runs release {v} in production.", "Which release of {svc} runs in production?",
                ["v2.3.1", "v2.4.0", "v2.5.2", "v3.0.0", "v3.1.4"]),
}
STEADY = [  # facts about the same services that never change (they share the service's entity)
    "{svc} owns the {noun} tables and nothing else.",
    "Deploys of {svc} go through the blue-green pipeline.",
    "Alerts for {svc} page the #ops-{noun} channel.",
]
NOUNS = ["invoice", "ledger", "index", "session", "message", "report", "export", "schedule"]


@dataclass
class Question:
    text: str
    current: str  # the ref of the value valid now (or at as_of)
    stale: tuple[str, ...]  # refs of the thing's other values
    kind: str
    as_of: str | None = None


@dataclass
class Loaded:
    questions: list[Question] = field(default_factory=list)
    about: dict[str, str] = field(default_factory=dict)  # ref -> the thing it states (svc/attr, or setting)
    pairs: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # kind -> text pairs (cosine table)


def ingest_coding(core: MemoryCore, data: Loaded, rng: random.Random) -> None:
    """The coding set, then two changes of each setting: a restatement by another agent, then a correction."""
    w = generate()
    results = core.add_memories([
        {"tenant": TENANT, "session": m.session, "agent": m.agent, "content": m.content, "type": m.type,
         "timestamp": m.timestamp, **({"role": m.role} if m.role else {})} for m in w.memories])
    end = max(m.timestamp for m in w.memories)
    for (key, _what, asked), in_set in zip(SETTINGS, _setting_refs(w, results), strict=True):
        ref, text = in_set
        old_value = text.split("=", 1)[1].split(" ", 1)[0]
        value = str(int(old_value) * 2)
        restated = text.replace(f"{key}={old_value}", f"{key}={value}")
        newer = core.add_memory(TENANT, "later", "coder", restated, type="note",
                                timestamp=(end + timedelta(days=rng.randint(5, 30))).isoformat()).ref
        value2 = str(int(value) + 1)
        corrected = core.update_memory(TENANT, newer, content=restated.replace(f"{key}={value}",
                                                                               f"{key}={value2}")).added.ref
        for r in (ref, newer, corrected):
            data.about[r] = key
        data.pairs.setdefault("one setting, values changed", []).append((text, restated))
        for q in (f"what is {key} set to now?", f"which setting controls {asked}?"):
            # the correction ended `newer` (recall leaves it out); `ref` was restated: it must step aside
            data.questions.append(Question(q, corrected, (ref, newer), "coding: setting now"))
    texts = [t for _r, t in _setting_refs(w, results)]
    data.pairs["different settings"] = [(a, b) for i, a in enumerate(texts) for b in texts[i + 1:]]


def _setting_refs(w: Any, results: Sequence[Any]) -> list[tuple[str, str]]:
    found = [(r.ref, m.content) for r, m in zip(results, w.memories, strict=True) if m.content.startswith("Config: ")]
    return found[:len(SETTINGS)]


def ingest_sequences(core: MemoryCore, data: Loaded, rng: random.Random) -> None:
    """Each service's attributes change three times, months apart; its steady facts never do."""
    for s, svc in enumerate(SERVICES):
        for k, template in enumerate(STEADY):
            ref = core.add_memory(TENANT, f"ops-{svc}", "planner", template.format(svc=svc, noun=NOUNS[s]),
                                  type="fact", timestamp=(T0 + timedelta(days=3 + k)).isoformat(),
                                  entities=[{"name": svc}]).ref
            data.about[ref] = f"{svc}/steady{k}"
        for attr, (say, ask, values) in ATTRIBUTES.items():
            picked = rng.sample(values, 4)
            refs: list[str] = []
            starts: list[datetime] = []
            start = T0 + timedelta(days=rng.randint(0, 20))
            corrected = s % 2 == 0  # half the services correct the fact (update_memory), half restate it
            how = "corrected" if corrected else "restated"
            for i, value in enumerate(picked):
                text, who = say.format(svc=svc, v=value), rng.choice(["planner", "coder", "tester"])
                if corrected and refs:  # recorded when it happened: the old version ends there
                    ref = core.update_memory(TENANT, refs[-1], content=text, agent=who,
                                             valid_from=start.isoformat()).added.ref
                else:  # the service declared as an entity, as an agent using add_memory's entities would
                    ref = core.add_memory(TENANT, f"ops-{svc}-{i}", who, text, type="fact",
                                          timestamp=start.isoformat(), entities=[{"name": svc}]).ref
                data.about[ref] = f"{svc}/{attr}"
                refs.append(ref)
                starts.append(start)
                start += timedelta(days=rng.randint(45, 120))
            texts = [say.format(svc=svc, v=v) for v in picked]
            data.pairs.setdefault("one attribute, values changed", []).extend(itertools.pairwise(texts))
            data.questions.append(Question(ask.format(svc=svc), refs[-1], tuple(refs[:-1]), f"{how}: value now"))
            for i in range(len(refs)):
                then = starts[i] + timedelta(days=10)
                data.questions.append(Question(ask.format(svc=svc), refs[i], tuple(r for r in refs if r != refs[i]),
                                               f"{how}: value at a date", then.isoformat()))
        steady = [t.format(svc=svc, noun=NOUNS[s]) for t in STEADY]
        one = [say.format(svc=svc, v=vals[0]) for say, _a, vals in ATTRIBUTES.values()]
        data.pairs.setdefault("one service, other attributes", []).extend(
            [(a, b) for a in one for b in one if a < b] + [(a, b) for a in one for b in steady])


@dataclass
class Board:
    n: int = 0
    found: int = 0  # the value valid now (or then) is among the rows at all
    met: int = 0
    none_above: int = 0  # no other value of the thing ranks above it (none shown when it is not)
    exact: int = 0  # as_of: the value valid then and no other value of the thing
    marked: int = 0
    false_marks: int = 0

    def row(self) -> list[str]:
        shares = (f"{x / self.n:.3f}" if self.n else "-" for x in (self.found, self.met, self.none_above, self.exact))
        return [str(self.n), *shares, str(self.marked), str(self.false_marks)]


def score(core: MemoryCore, data: Loaded, include_stale: bool) -> dict[str, Board]:
    boards: dict[str, Board] = {}
    for q in data.questions:
        board = boards.setdefault(q.kind, Board())
        options: dict[str, Any] = {"limit": DEPTH, "include_stale": include_stale}
        if q.as_of:
            options["as_of"] = q.as_of
        rows = core.recall(TENANT, q.text, **options).messages
        refs = [r.ref for r in rows]
        board.n += 1
        board.found += q.current in refs
        # met: the value valid now (or then) is shown, above every other value of the thing shown
        board.met += q.current in refs and all(refs.index(q.current) < refs.index(r) for r in q.stale if r in refs)
        at = refs.index(q.current) if q.current in refs else len(refs)
        board.none_above += not any(r in refs[:at] for r in q.stale)
        if q.as_of:  # as of a date: no value from after it (the store's validity), whatever the ranking
            board.exact += q.current in refs and not any(r in refs for r in q.stale)
        for r in rows:
            if r.newer is not None:
                board.marked += 1
                board.false_marks += data.about.get(r.ref) != data.about.get(r.newer)
    return boards


def cosines(core: MemoryCore, pairs: dict[str, list[tuple[str, str]]]) -> dict[str, dict[str, float]]:
    """Quantiles of the cosine between the two texts of each pair kind, on the store's embedder."""
    embedder = core.operator_parts().embedder
    out = {}
    for kind, items in pairs.items():
        vecs = embedder.embed([t for pair in items for t in pair])
        values = sorted(_cos(vecs[2 * i], vecs[2 * i + 1]) for i in range(len(items)))
        out[kind] = {"n": len(values), "min": values[0], "p10": values[len(values) // 10],
                     "median": values[len(values) // 2], "p90": values[(9 * len(values)) // 10], "max": values[-1]}
    return out


def _cos(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na, nb = sum(x * x for x in a) ** 0.5, sum(y * y for y in b) ** 0.5
    return dot / (na * nb) if na and nb else 0.0


def run(embedder: str = "minilm") -> dict[str, Any]:
    rng = random.Random(49)
    with tempfile.TemporaryDirectory(prefix="updates-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(embedder))
        try:
            data = Loaded()
            with stage("ingest"):
                ingest_coding(core, data, rng)
                ingest_sequences(core, data, rng)
            with stage("recall"):
                stepped, as_was = score(core, data, False), score(core, data, True)
            table = cosines(core, data.pairs)
        finally:
            core.close()
    cfg = StaleConfig()
    return {"questions": len(data.questions),
            "stale_config": {"low": cfg.low, "unshared": cfg.unshared, "near": cfg.near, "step": cfg.step,
                             "pool": cfg.pool},
            "stale_steps_aside": {k: vars(b) for k, b in stepped.items()},
            "include_stale": {k: vars(b) for k, b in as_was.items()}, "cosines": table}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--embedder", default="minilm", help="minilm, or fastembed:<model> (of fastembed's catalogue)")
    args = parser.parse_args(argv)
    result = run(args.embedder)
    header = ["questions", "n", "found", "met", "none above", "only then", "marked", "false marks"]
    for title, key in (("stale facts step aside (default)", "stale_steps_aside"),
                       ("include_stale (every row as it was)", "include_stale")):
        print_table(f"{title} — {result['questions']} questions", header,
                    [[kind, *Board(**b).row()] for kind, b in result[key].items()])
    print_table(f"cosine of pairs ({result['stale_config']})", ["pairs", "n", "min", "p10", "median", "p90", "max"],
                [[k, int(v["n"]), *(f"{v[m]:.3f}" for m in ("min", "p10", "median", "p90", "max"))]
                 for k, v in result["cosines"].items()])
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
