"""Write-time hygiene: rows that carry no information are answered ``stored: false`` with a reason and
written nowhere; a labelled set of junk and short real facts holds that no fact is ever dropped."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.write.hygiene import REASONS, junk_reason
from testbed.labelled_sets import labelled_set
from tests.support.backends import open_core, store_backends
from tests.support.store_checks import assert_stores_agree

BACKENDS = store_backends("memory", "persistent", "postgres")


def labelled() -> list[dict[str, Any]]:
    return labelled_set("hygiene")


def test_no_labelled_fact_is_dropped() -> None:
    held_out = labelled_set("hygiene", "heldout")
    rows = [*labelled(), *held_out]  # held out: written after the rules, never tuned on
    dropped = [(r["text"], junk_reason(r["text"])) for r in rows if not r["junk"] and junk_reason(r["text"])]
    assert dropped == []


def test_labelled_junk_is_recognised_with_its_reason() -> None:
    rows = [r for r in labelled() if r["junk"]]
    wrong = [(r["text"], r["reason"], junk_reason(r["text"])) for r in rows if junk_reason(r["text"]) != r["reason"]]
    assert wrong == []
    assert {r["reason"] for r in rows} == set(REASONS) - {"repeat"}  # every kind is in the set
    assert sum(not r["junk"] for r in labelled()) >= 100


@pytest.mark.parametrize("text", ["yes", "no", "port 5433", "yes, use Postgres 16", "42", "Alice", "make check",
                                  "ok, but only after the 2.0 release", "heartbeat interval is 30s", "?"])
def test_short_facts_are_kept(text: str) -> None:
    assert junk_reason(text) is None


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    c = open_core(request.param, tmp_path / "data", request)
    yield c
    c.close()


def test_junk_is_answered_not_stored(store: MemoryCore) -> None:
    kept = store.add_memory("acme", "s", "bot", "yes, use Postgres 16")
    junk = store.add_memory("acme", "s", "bot", "Thanks!")
    assert kept.stored and kept.ref is not None
    assert not junk.stored and junk.reason == "acknowledgement" and junk.ref is None and not junk.created
    assert junk.to_dict()["stored"] is False and junk.to_dict()["reason"] == "acknowledgement"
    assert [r.content for r in store.query_recent_turns("acme", "s").turns] == ["yes, use Postgres 16"]
    assert store.recall("acme", "thanks").messages == [] or all(
        m.content != "Thanks!" for m in store.recall("acme", "thanks").messages)
    assert_stores_agree(store)


def test_an_agents_exact_repeat_is_not_stored_but_another_agents_is(store: MemoryCore) -> None:
    first = store.add_memory("acme", "s", "bot", "deploy window is 14:00-16:00 UTC")
    again = store.add_memory("acme", "s", "bot", "Deploy window is  14:00-16:00 UTC")  # the same words
    other = store.add_memory("acme", "s", "eve", "deploy window is 14:00-16:00 UTC")
    private = store.add_memory("acme", "s", "bot", "deploy window is 14:00-16:00 UTC", visibility="agent")
    assert not again.stored and again.reason == "repeat" and again.ref == first.ref
    assert other.stored and other.duplicate_of == first.ref  # another agent's: stored, reported as before
    assert private.stored  # a different visibility is a different row
    assert len(store.query_recent_turns("acme", "s", viewer="bot").turns) == 3


def test_a_repeat_outside_the_window_is_stored(store: MemoryCore) -> None:
    store.add_memory("acme", "s", "bot", "nightly backup finished", timestamp="2026-01-01T00:00:00+00:00")
    later = store.add_memory("acme", "s", "bot", "nightly backup finished", timestamp="2026-01-02T00:00:00+00:00")
    assert later.stored


def test_batch_replies_per_item_and_repeats_within_the_call(store: MemoryCore) -> None:
    items: list[Any] = [{"tenant": "acme", "session": "s", "agent": "bot", "content": c}
                        for c in ["port 5433", "ok", "NO_REPLY", "port 5433", "[Request interrupted by user]", "no"]]
    results = store.add_memories(items)
    assert [r.stored for r in results] == [True, False, False, False, False, True]
    assert [r.reason for r in results] == [None, "acknowledgement", "acknowledgement", "repeat", "bookkeeping", None]
    assert results[3].ref == results[0].ref
    assert sorted(r.content for r in store.query_recent_turns("acme", "s").turns) == ["no", "port 5433"]
    assert_stores_agree(store)


def test_hygiene_is_configured_per_tenant(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    core = open_core("memory", tmp_path / "d", request, hygiene={"enabled": True, "tenants": {"raw": False}})
    try:
        assert not core.add_memory("acme", "s", "bot", "ok").stored
        assert core.add_memory("raw", "s", "bot", "ok").stored
    finally:
        core.close()
    off = open_core("memory", tmp_path / "e", request, hygiene={"enabled": False, "tenants": {"clean": True}})
    try:
        assert off.add_memory("acme", "s", "bot", "ok").stored
        assert not off.add_memory("clean", "s", "bot", "ok").stored
    finally:
        off.close()


def test_corrections_and_handoffs_are_not_screened(store: MemoryCore) -> None:
    """A correction or a handoff is a deliberate write: its words are kept whatever they are."""
    first = store.add_memory("acme", "s", "bot", "use port 5432")
    assert first.ref is not None
    assert store.update_memory("acme", first.ref, content="ok").added.stored
    assert store.create_handoff("acme", "s", "bot", "ok").stored


def test_a_repeat_is_never_found_in_another_tenant(store: MemoryCore) -> None:
    store.add_memory("acme", "s", "bot", "the build is red on main")
    assert store.add_memory("other", "s", "bot", "the build is red on main").stored


def test_a_backfilled_repeat_is_found_by_its_time_not_by_when_it_was_written(store: MemoryCore) -> None:
    """An import-like backfill: the agent's repeat of an old turn arrives after 80 newer rows of its own."""
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows: list[Any] = [{"tenant": "acme", "session": "s", "agent": "bot", "content": f"fact number {i}",
                        "timestamp": t0 + timedelta(minutes=i)} for i in range(80)]
    first = store.add_memories(rows)
    again = store.add_memory("acme", "s", "bot", "fact number 3", timestamp=t0 + timedelta(minutes=3, seconds=30))
    assert not again.stored and again.reason == "repeat" and again.ref == first[3].ref


def test_a_retry_with_the_idempotency_key_is_answered_with_the_first_ref_whatever_hygiene_says(
        store: MemoryCore) -> None:
    first = store.add_memory("acme", "s", "bot", "hello there, the deploy is at 5", idempotency_key="k1")
    again = store.add_memory("acme", "s", "bot", "hello there, the deploy is at 5", idempotency_key="k1")
    batch = store.add_memories([{"tenant": "acme", "session": "s", "agent": "bot", "content": "ok",
                                 "idempotency_key": "k1"}])
    assert (again.ref, again.created, again.stored) == (first.ref, False, True)
    assert (batch[0].ref, batch[0].created, batch[0].stored) == (first.ref, False, True)


class _MeetingEmbedder:
    """The core's embedder, but every call waits until ``parties`` callers embed at once: two adds have both
    looked for a repeat before either writes, which is the race a repeat check before the lock loses."""

    def __init__(self, inner: Any, parties: int) -> None:
        self.inner = inner
        self.barrier = threading.Barrier(parties, timeout=10)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.barrier.wait()
        return self.inner.embed(texts)  # type: ignore[no-any-return]


def test_two_concurrent_repeats_by_one_agent_store_one_row(store: MemoryCore) -> None:
    writer = store._writer
    writer.embedder = _MeetingEmbedder(writer.embedder, 2)  # type: ignore[assignment]
    item: Any = {"tenant": "acme", "session": "s", "agent": "bot", "content": "the staging cluster is eu-west-2"}
    with ThreadPoolExecutor(2) as pool:
        results = [f.result() for f in [pool.submit(store.add_memories, [item]) for _ in range(2)]]
    answers = sorted((r[0].stored, r[0].reason) for r in results)
    assert answers == [(False, "repeat"), (True, None)]
    assert results[0][0].ref == results[1][0].ref  # the repeat answers with the row it repeats
    assert [t.content for t in store.query_recent_turns("acme", "s").turns] == [item["content"]]
    assert_stores_agree(store)
