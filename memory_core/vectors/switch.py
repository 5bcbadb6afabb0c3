"""The index in use (an embedder and the vector store its vectors live in), switchable while a store serves.

A re-embed run inside a serving process (:mod:`memory_core.operator.reembedding`) ends by moving that
process's core to the new model and collections without a restart. The core's services hold the
:class:`SwitchedEmbedder` and :class:`SwitchedVectors` of one :class:`IndexSwitch`, which forward every call
to the pair in use at that moment. What needs both halves to agree pins them:

- a recall embeds its query and searches the index with ONE pair (:func:`pinned`); the old pair stays open
  until the last recall pinned to it ends (:meth:`IndexSwitch.wait_unpinned`), and is dropped only then;
- a write embeds outside the writer lock and writes under it, where the switch happens too: it takes a
  :func:`stamp` before embedding and embeds again under the lock when the pair changed meanwhile
  (:func:`still_current`), so no row written with the old model lands in the new index.

A replica (PostgreSQL and a Chroma server, several processes) that did not run the re-embed learns of it from
the store's recorded model and prefix (:meth:`IndexSwitch.watch`, a meta read at most every few seconds, and
before every write) and answers EMBEDDER_MISMATCH from then on, until it is restarted with the new model.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from memory_core.embedding.api import Embedder
from memory_core.errors import EmbedderMismatchError
from memory_core.vectors.api import VectorStore, index_loaded
from memory_core.vectors.wrapper import Op, VectorStoreWrapper

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Index:
    """One pair in use: the embedder and the vector store its vectors are in; ``generation`` counts switches."""

    embedder: Embedder
    vectors: VectorStore
    generation: int


class IndexSwitch:
    """The pair a core uses now, switched in place by a re-embed (see the module docstring)."""

    def __init__(self, embedder: Embedder, vectors: VectorStore) -> None:
        self._index = Index(embedder, vectors, 0)
        self._changed = threading.Condition()
        self._pins: dict[int, int] = {}  # generation -> recalls pinned to it
        self._recorded: Callable[[], tuple[str | None, str | None]] | None = None
        self._seen: tuple[str | None, str | None] = (None, None)
        self._every_s = 0.0
        self._checked = 0.0
        self._stale: str | None = None
        self._coming: tuple[str | None, str | None] | None = None  # what this process is about to record
        self.embedder = SwitchedEmbedder(self)
        self.vectors = SwitchedVectors(self)

    def watch(self, recorded: Callable[[], tuple[str | None, str | None]], every_s: float) -> None:
        """Replicas: ``recorded`` reads the store's recorded (model identity, collection prefix); when another
        process re-embedded the store (they changed), every vector call and recall fails EMBEDDER_MISMATCH
        rather than read or write the old index it dropped. Read at most every ``every_s`` (writes: always)."""
        self._recorded, self._every_s = recorded, every_s
        self._seen, self._checked = recorded(), time.monotonic()

    def check(self, *, now: bool = False) -> None:
        """EMBEDDER_MISMATCH when another process switched the store to another index (see :meth:`watch`)."""
        read = self._recorded
        if read is None:
            return
        if now or time.monotonic() - self._checked >= self._every_s:
            found, self._checked = read(), time.monotonic()
            self._stale = None if found in (self._seen, self._coming) else (
                f"This store was re-embedded by another process (its index is now '{found[1]}', built with "
                f"'{found[0]}'); this process still holds '{self._seen[0]}' and stops using the old index: restart "
                "it with the new embedding settings.")
        if self._stale is not None:
            raise EmbedderMismatchError(self._stale, key="embedding.provider", stored=self._seen[0] or "")

    def current(self) -> Index:
        return self._index

    @contextmanager
    def pin(self) -> Iterator[Index]:
        """The pair in use now, kept open (not dropped by a switch) until the block ends."""
        self.check()
        with self._changed:
            index = self._index
            self._pins[index.generation] = self._pins.get(index.generation, 0) + 1
        try:
            yield index
        finally:
            with self._changed:
                self._pins[index.generation] -= 1
                self._changed.notify_all()

    def expect(self, identity: str, prefix: str) -> None:
        """This process is about to record ``identity`` and ``prefix`` itself (its own re-embed's switch): the
        watch takes them for the store's own until :meth:`switch_to`, not for another process's."""
        self._coming = (identity, prefix)

    def switch_to(self, embedder: Embedder, vectors: VectorStore) -> Index:
        """Use ``embedder`` and ``vectors`` from now on; returns the pair replaced (still open).
        The caller holds the writer lock (no write is between embedding and writing)."""
        with self._changed:
            old = self._index
            self._index = Index(embedder, vectors, old.generation + 1)
            if self._recorded is not None:  # this process recorded the switch: its new index is the store's
                self._seen, self._stale, self._coming = self._recorded(), None, None
            self._changed.notify_all()
            return old

    def wait_unpinned(self, index: Index, timeout_s: float) -> bool:
        """Wait until no recall is pinned to ``index`` (False when some still are after ``timeout_s``)."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while self._pins.get(index.generation, 0) > 0:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True


class SwitchedEmbedder:
    """The embedder of the pair in use, whichever it is at each call."""

    def __init__(self, switch: IndexSwitch) -> None:
        self.switch = switch

    @property
    def name(self) -> str:
        return self.switch.current().embedder.name

    @property
    def dimension(self) -> int:
        return self.switch.current().embedder.dimension

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return self.switch.current().embedder.embed(texts)

    def __getattr__(self, name: str) -> Any:  # embed_query, warm-up hooks: the current model's own
        return getattr(self.switch.current().embedder, name)


class SwitchedVectors(VectorStoreWrapper):
    """The vector store of the pair in use, whichever it is at each call."""

    def __init__(self, switch: IndexSwitch) -> None:
        super().__init__(switch.current().vectors)
        self.switch = switch

    def _inner(self) -> VectorStore:
        return self.switch.current().vectors

    def _call(self, op: Op, tenant: str | None, fn: Callable[[VectorStore], T], *, added: int = 0,
              dimension: int | None = None) -> T:
        self.switch.check(now=op == "upsert")  # a write never lands in an index another process dropped
        return fn(self._inner())

    def loaded(self, tenant: str) -> bool:
        return index_loaded(self._inner(), tenant)

    def wedged(self) -> str | None:
        wedged = getattr(self._inner(), "wedged", None)
        return wedged() if callable(wedged) else None

    def close(self) -> None:
        self._inner().close()


@contextmanager
def pinned(embedder: Embedder, vectors: VectorStore) -> Iterator[tuple[Embedder, VectorStore]]:
    """``embedder`` and ``vectors`` as one pair for the block: the switch's pair in use (pinned) when they are
    switched, else themselves."""
    if isinstance(vectors, SwitchedVectors):
        with vectors.switch.pin() as index:
            yield index.embedder, index.vectors
    else:
        yield embedder, vectors


def stamp(embedder: Embedder) -> int | None:
    """Which pair ``embedder`` embeds with now (None: a plain embedder, never switched); take it before embedding."""
    return embedder.switch.current().generation if isinstance(embedder, SwitchedEmbedder) else None


def still_current(embedder: Embedder, taken: int | None) -> bool:
    """True when the pair ``taken`` (:func:`stamp`) is still in use: vectors embedded then may be written."""
    return stamp(embedder) == taken
