"""Handoff search on tenants holding several topics' handoffs: is the newest handoff of what was asked first?

    python -m bench.quality.handoffs [--stores 8] [--seed 7] [--json PATH]

Each store is one tenant over 30 days: handoffs of several pieces of work (topics), among them
siblings that share a word ("billing queue migration" / "payments API migration", "search index
rebuild" / "search ranking tuning"), one-off handoffs about nothing else ("the office plants were
watered"), and the turns and notes of the work around them. Half the pieces of work hand off
within one session (``create_handoff``: a chain), the others across sessions. The wording varies:
handoffs are prefixed "handoff:", "Handoff —", "session handoff:" or nothing, and the later
handoffs of a piece of work name it less (the newest often says only what is left). Every topic is asked for the way
an agent asks (``recall(query, type="handoff")``): by its name, "handoff for the <name>", with
detail words, by two words of it. Measured per question:

- **newest first**: the first row is the newest handoff of the topic asked;
- **unrelated admitted**: a handoff of another topic (sibling or not) is returned (share of
  questions), and the share of returned rows that are other topics';
- **topic kept**: the share of the topic's handoffs returned (limit 10);
- **single topic**: the same on stores with one topic and one unrelated handoff (the behaviour
  ``tests/memory_core/recall/test_recall_type_order.py`` pins), where nothing may get worse;
- **p50 ms**: a handoff recall's wall time.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import open_bench_core, print_table, stage
from bench.latency.embed_cache import cached_embedder
from memory_core import MemoryCore


@dataclass(frozen=True)
class Topic:
    name: str  # how it is asked for
    detail: str  # words an agent adds when it asks ("retry worker")
    states: tuple[str, ...]  # its handoffs, oldest first: the later ones name the work less


# sibling pairs share a word of their names
TOPICS = (
    Topic("billing queue migration", "retry worker", (
        "started the billing queue migration to postgres; the retry worker and the dead-letter queue still need review",
        "billing queue migration done, retry worker reviewed; the dead-letter queue review is left",
        "dead-letter queue reviewed too; next step is the release notes for billing",
        "billing queue: replayed the stuck invoices, nothing pending")),
    Topic("payments API migration", "client versioning", (
        "payments API migration: v2 endpoints are live behind a flag, clients still call v1",
        "moved the mobile client to the v2 payments endpoints; web client next",
        "web client switched too; v1 payments endpoints can be retired after the notice period")),
    Topic("search index rebuild", "shard reindex", (
        "search index rebuild kicked off on the new cluster; shards 1-4 reindexed",
        "reindex of shards 5-8 finished, index rebuild at 80%; aliases not swapped yet",
        "aliases swapped to the rebuilt index; old cluster can be drained")),
    Topic("search ranking tuning", "boost weights", (
        "search ranking tuning: title boost raised to 2.0, click data shows better top results",
        "ranking experiment B lost to A on long queries; reverted the freshness boost",
        "final weights committed; the ranking dashboard needs a new panel")),
    Topic("release notes draft", "changelog", (
        "release notes draft for 4.2 started from the changelog; breaking changes section empty",
        "release notes: breaking changes written, screenshots missing",
        "screenshots added; waiting on marketing to approve the wording")),
    Topic("release pipeline fix", "flaky deploy step", (
        "release pipeline fix: the deploy step fails on the artifact upload, retries hide it",
        "pinned the uploader version; the pipeline is green on staging",
        "production deploy went through twice without the flaky step")),
    Topic("login page redesign", "new layout", (
        "login page redesign: new layout mocked up, the SSO button placement is open",
        "implemented the new layout behind a feature flag; accessibility review pending",
        "accessibility fixes merged; rollout to 10% of users tomorrow")),
    Topic("login rate limiter", "brute force", (
        "login rate limiter added in front of the auth service: 5 tries a minute per account",
        "brute force test showed the limiter keys by IP too; lowered to 20 per IP",
        "limits tuned after the false-positive reports; alerting wired to the on-call channel")),
    Topic("database backup schedule", "nightly snapshots", (
        "database backup schedule moved to 02:00 UTC; nightly snapshots kept 14 days",
        "restore drill from last night's snapshot took 40 minutes; documented the steps",
        "backups now copied to the second region as well")),
    Topic("database connection pool", "max connections", (
        "database connection pool exhausted under load; raised max connections to 80",
        "pool timeouts gone after moving the report jobs to a replica",
        "connection pool metrics added to the dashboard; nothing else pending")),
    Topic("push notification service", "device tokens", (
        "push notification service: stale device tokens cause 30% failures; cleanup job written",
        "cleanup job ran, failures down to 4%; iOS certificate expires next month",
        "renewed the iOS certificate; the service is quiet")),
    Topic("email digest", "weekly summary", (
        "email digest: weekly summary template done, unsubscribe link missing",
        "unsubscribe link added; the digest goes to the beta group on Monday",
        "beta feedback in: shorten the summary, then send to everyone")),
)
ONE_OFFS = ("the office plants were watered", "design review of the new logo finished",
            "the team offsite is booked for the 14th", "lunch is at noon on fridays",
            "moved the standup to 9:30 for the next two weeks")
PREFIXES = ("handoff: ", "Handoff — ", "session handoff: ", "", "handoff for the next agent: ")
CHATTER = ("ran the tests again, all green", "reviewed the open pull requests", "answered the questions in the channel",
           "updated the tickets", "paired on the {w} issue", "looked into the {w} alert", "wrote notes about the {w}")


@dataclass
class Store:
    topics: list[Topic]
    handoffs: dict[str, list[tuple[datetime, str]]] = field(default_factory=dict)  # topic -> (when, ref) newest last
    one_offs: list[str] = field(default_factory=list)


def _questions(topic: Topic) -> list[str]:
    words = topic.name.split()
    return [topic.name, f"handoff for the {topic.name}", f"{topic.name} {topic.detail}",
            f"where did we leave the {' '.join(words[:2])}"]


def build(core: MemoryCore, tenant: str, topics: Sequence[Topic], rng: random.Random, now: datetime,
          one_offs: int) -> Store:
    """One tenant: every topic's handoffs spread over 30 days (oldest first), one-offs among the newest,
    and chatter around them."""
    store = Store(list(topics))
    items: list[tuple[dict[str, Any], str]] = []
    chained: list[tuple[dict[str, Any], str]] = []
    for n, t in enumerate(topics):
        in_one = rng.random() < 0.5  # its handoffs chain in one session, or cross sessions
        when = now - timedelta(days=rng.uniform(5, 30))
        for i, state in enumerate(t.states):
            when = min(now - timedelta(hours=1), when + timedelta(hours=rng.uniform(2, 24 * 6)))
            session = f"work{n}" if in_one else f"work{n}-{i}"
            handoff = {"tenant": tenant, "session": session, "agent": rng.choice(["planner", "coder", "reviewer"]),
                       "content": rng.choice(PREFIXES) + state, "type": "handoff", "timestamp": when}
            (chained if in_one else items).append((handoff, t.name))
            for _ in range(rng.randint(2, 5)):
                chat = rng.choice(CHATTER).format(w=rng.choice(t.name.split()))
                items.append(({"tenant": tenant, "session": session, "agent": "coder", "content": chat,
                               "type": rng.choice(["turn", "note"]),
                               "timestamp": when - timedelta(minutes=rng.uniform(5, 90))}, ""))
    for text in rng.sample(ONE_OFFS, one_offs):
        items.append(({"tenant": tenant, "session": "misc", "agent": "planner", "content": rng.choice(PREFIXES) + text,
                       "type": "handoff", "timestamp": now - timedelta(minutes=rng.uniform(5, 600))}, "-"))
    results = core.add_memories([item for item, _t in items])
    for result, (item, topic) in zip(results, items, strict=True):
        if topic == "-":
            store.one_offs.append(result.ref)
        elif topic:
            store.handoffs.setdefault(topic, []).append((item["timestamp"], result.ref))
    for item, topic in chained:  # each the session's next link (SUPERSEDES the one before)
        ref = core.create_handoff(tenant, item["session"], item["agent"], item["content"],
                                  timestamp=item["timestamp"]).ref
        store.handoffs.setdefault(topic, []).append((item["timestamp"], ref))
    for rows in store.handoffs.values():
        rows.sort()
    return store


@dataclass
class Board:
    newest: list[float] = field(default_factory=list)
    unrelated_any: list[float] = field(default_factory=list)
    unrelated_rows: list[float] = field(default_factory=list)
    kept: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def add(self, refs: list[str], own: list[str], newest: str) -> None:
        others = [r for r in refs if r not in own]
        self.newest.append(1.0 if refs and refs[0] == newest else 0.0)
        self.unrelated_any.append(1.0 if others else 0.0)
        self.unrelated_rows.append(len(others) / len(refs) if refs else 0.0)
        self.kept.append(len(set(refs) & set(own)) / len(own))

    def row(self, label: str) -> list[Any]:
        def mean(xs: list[float]) -> str:
            return f"{sum(xs) / len(xs):.3f}" if xs else "-"

        return [label, len(self.newest), mean(self.newest), mean(self.unrelated_any), mean(self.unrelated_rows),
                mean(self.kept), f"{statistics.median(self.ms):.1f}"]

    def summary(self) -> dict[str, float]:
        out = {k: round(sum(v) / len(v), 4) for k, v in vars(self).items() if v and k != "ms"}
        return {**out, "p50_ms": round(statistics.median(self.ms), 2)}


def ask(core: MemoryCore, tenant: str, store: Store, board: Board) -> None:
    for t in store.topics:
        own = [ref for _when, ref in store.handoffs[t.name]]
        for q in _questions(t):
            started = time.perf_counter()
            refs = [m.ref for m in core.recall(tenant, q, type="handoff", limit=10).messages]
            board.ms.append((time.perf_counter() - started) * 1000)
            board.add(refs, own, own[-1])


def run(stores: int, seed: int) -> dict[str, Any]:
    now = datetime.now(UTC)
    boards = {"several topics": Board(), "single topic": Board()}
    with tempfile.TemporaryDirectory(prefix="handoffs-bench-") as tmp:
        core = open_bench_core(Path(tmp) / "store", cached_embedder("minilm"))
        try:
            with stage(f"{stores} stores of several topics, {stores} of one"):
                for i in range(stores):
                    rng = random.Random(seed * 1000 + i)
                    pairs = rng.sample(range(len(TOPICS) // 2), 4)  # 4 sibling pairs, sometimes one of a pair
                    topics = [TOPICS[2 * p + k] for p in pairs for k in (0, 1) if k == 0 or rng.random() < 0.8]
                    tenant = f"multi-{i}"
                    ask(core, tenant, build(core, tenant, topics, rng, now, one_offs=2), boards["several topics"])
                    tenant = f"single-{i}"
                    topic = TOPICS[rng.randrange(len(TOPICS))]
                    ask(core, tenant, build(core, tenant, [topic], rng, now, one_offs=1), boards["single topic"])
        finally:
            core.close()
    print_table("handoff recall, type=\"handoff\" (limit 10)",
                ["stores", "questions", "newest first", "unrelated admitted", "unrelated rows", "topic kept", "p50 ms"],
                [b.row(label) for label, b in boards.items()])
    return {label: b.summary() for label, b in boards.items()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    out = run(args.stores, args.seed)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
