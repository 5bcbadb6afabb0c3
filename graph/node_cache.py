"""A bounded least-recently-used map: the store's working set of nodes, never the whole store."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """``capacity`` entries at most; reading an entry makes it the newest. Thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = max(0, capacity)
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return value

    def get_many(self, keys: Iterable[K]) -> tuple[dict[K, V], list[K]]:
        """The entries held for ``keys`` (each made the newest) and the keys missing, in order: one
        lock for the lot, not one per key (recall looks up ~300 nodes a query while its two branch
        workers use the same cache)."""
        found: dict[K, V] = {}
        missing: list[K] = []
        with self._lock:
            items = self._items
            for key in keys:
                value = items.get(key)
                if value is None:
                    missing.append(key)
                else:
                    items.move_to_end(key)
                    found[key] = value
            self.hits += len(found)
            self.misses += len(missing)
        return found, missing

    def put(self, key: K, value: V) -> None:
        if self.capacity == 0:
            return
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)

    def discard(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)
