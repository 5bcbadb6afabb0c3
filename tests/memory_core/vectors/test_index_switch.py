"""A core's embedder and index switched in place (memory_core.vectors.switch), as a re-embed run by the serving
process does: a recall under way keeps the pair it started with, a write embedded before the switch embeds
again under the writer lock, and the old pair stays open until its last recall ends."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from memory_core.vectors.memory import InMemoryVectorStore
from memory_core.vectors.switch import IndexSwitch, pinned, stamp, still_current


class Hooked(HashEmbedder):
    """A hash embedder that runs ``hook`` once, during its first call after ``armed`` is set."""

    def __init__(self, dimension: int) -> None:
        super().__init__(dimension)
        self.hook: Callable[[], None] | None = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out = super().embed(texts)
        hook, self.hook = self.hook, None
        if hook is not None:
            hook()
        return out

    def embed_query(self, texts: Sequence[str]) -> list[list[float]]:
        return self.embed(texts)


class Watched(InMemoryVectorStore):
    """An in-memory index that keeps the query vectors it is asked with."""

    def __init__(self) -> None:
        super().__init__()
        self.queried: list[Sequence[float]] = []

    def query(self, tenant, embedding, n, where=None, ids=None):  # type: ignore[no-untyped-def]
        self.queried.append(embedding)
        return super().query(tenant, embedding, n, where, ids)


def open_core(path: Path, embedder: HashEmbedder) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash", "dimension": 64}})
    return MemoryCore.open(path, settings=settings, embedder=embedder, in_memory_vectors=True)


def test_a_write_embedded_before_the_switch_is_embedded_again_with_the_new_model(tmp_path: Path) -> None:
    old = Hooked(64)
    with open_core(tmp_path, old) as core:
        switch = core.operator_parts().switch
        assert switch is not None
        new_vectors, new_model = InMemoryVectorStore(), HashEmbedder(32)
        old.hook = lambda: switch.switch_to(new_model, new_vectors)  # between embedding and the writer lock
        ref = core.add_memory("acme", "s1", "ann", "the kiwi orchard needs water").ref
        stored = new_vectors.embeddings("acme", [ref])
        want = new_model.embed(["the kiwi orchard needs water"])[0]  # not the old model's vector in the new index
        assert len(stored[ref]) == 32 and max(abs(a - b) for a, b in zip(stored[ref], want, strict=True)) < 1e-5
        assert core.recall("acme", "kiwi orchard").messages[0].ref == ref  # and the new pair answers


def test_a_recall_under_way_keeps_the_pair_it_started_with(tmp_path: Path) -> None:
    model = Hooked(64)
    with open_core(tmp_path, model) as core:
        ref = core.add_memory("acme", "s1", "ann", "the kiwi orchard needs water").ref
        switch = core.operator_parts().switch
        assert switch is not None
        old, new = switch.current(), Watched()
        model.hook = lambda: switch.switch_to(HashEmbedder(32), new)  # right after the query is embedded
        assert core.recall("acme", "kiwi orchard", limit=3).messages[0].ref == ref
        assert switch.current() is not old and new.queried == []  # the 64-dimension query searched the old index
        assert switch.wait_unpinned(old, 0.1)
        core.recall("acme", "kiwi orchard", limit=3)
        assert [len(v) for v in new.queried] == [32]  # the next recall: the new pair


def test_the_old_pair_stays_pinned_until_its_last_recall_ends() -> None:
    switch = IndexSwitch(HashEmbedder(64), InMemoryVectorStore())
    first = switch.current()
    inside, leave = threading.Event(), threading.Event()
    seen: list[int] = []

    def recall() -> None:
        with pinned(switch.embedder, switch.vectors) as (embedder, _vectors):
            inside.set()
            leave.wait(5)
            seen.append(embedder.dimension)

    worker = threading.Thread(target=recall)
    worker.start()
    inside.wait(5)
    taken = stamp(switch.embedder)
    assert switch.switch_to(HashEmbedder(32), InMemoryVectorStore()) is first
    assert not still_current(switch.embedder, taken) and switch.embedder.dimension == 32
    assert not switch.wait_unpinned(first, 0.05)  # the recall still holds the old pair
    leave.set()
    worker.join(5)
    assert switch.wait_unpinned(first, 1.0) and seen == [64]


def test_a_session_summary_embedded_before_the_switch_is_embedded_again_with_the_new_model(tmp_path: Path) -> None:
    model = Hooked(64)
    with open_core(tmp_path, model) as core:
        for text in ("we moved the kiwi harvest to monday", "the orchard pump is fixed"):
            core.add_memory("acme", "s1", "ann", text)
        switch = core.operator_parts().switch
        assert switch is not None
        new = InMemoryVectorStore()
        model.hook = lambda: switch.switch_to(HashEmbedder(32), new)
        episode = core.summarize_session("acme", "s1")
        stored = new.embeddings("acme", [episode.ref])
        assert [len(v) for v in stored.values()] == [32]


def test_a_watched_switch_fails_embedder_mismatch_once_another_process_recorded_another_index() -> None:
    import pytest

    from memory_core.errors import EmbedderMismatchError

    recorded: list[tuple[str | None, str | None]] = [("hash-bow/64", None)]
    switch = IndexSwitch(HashEmbedder(64), InMemoryVectorStore())
    switch.watch(lambda: recorded[0], 0.0)
    switch.vectors.count("acme")
    switch.expect("hash-bow/32", "mcr1")  # this process's own re-embed, committed before it switches
    recorded[0] = ("hash-bow/32", "mcr1")
    with switch.pin():  # a recall in between is not refused
        pass
    switch.switch_to(HashEmbedder(32), InMemoryVectorStore())
    switch.vectors.count("acme")
    recorded[0] = ("hash-bow/16", "mcr2")  # another process's re-embed
    with pytest.raises(EmbedderMismatchError, match="re-embedded by another process"):
        switch.vectors.count("acme")
    with pytest.raises(EmbedderMismatchError), switch.pin():
        pass
