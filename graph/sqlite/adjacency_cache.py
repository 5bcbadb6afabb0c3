"""Recall's session neighbours, kept between requests while their session is not written.

Recall reads, for ~100 dialogue rows a query, the memories right before and after each one in
its session: two index seeks a row (~1.1 ms a recall at 100k memories, and disk reads where the
file's pages are not resident). Most sessions of a tenant are not written between two recalls,
so the answers are kept in an LRU keyed by memory id, each with the commit tick it was read at.
A commit that writes or erases a memory moves its session's tick, and an entry is used only
while its session has not been written since it was read. The session ticks are bounded too: a
session dropped from them counts as written at the newest tick dropped so far, so its entries read
before then are refused, never wrongly kept.

This is correct only where every write to the file passes through this process's store (the
SQLite backend: one process owns a data directory); a reset of the caches clears it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping

from graph.api import Key, MemoryNode
from graph.node_cache import LRU

SESSIONS_KEPT = 100_000  # sessions whose last write tick is remembered (~100 bytes each)
Pair = tuple[Key | None, Key | None]


class AdjacencyCache:
    """(previous, next) keys of memories in their session, valid while the session is unwritten."""

    def __init__(self, capacity: int, sessions_kept: int = SESSIONS_KEPT) -> None:
        self._pairs: LRU[int, tuple[int, str, str, Pair]] = LRU(capacity)
        self._written: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._sessions_kept = max(1, sessions_kept)
        self._floor = 0  # the newest tick of a session dropped from _written
        self._tick = 0  # commits that wrote a memory, seen by this process
        self._lock = threading.Lock()

    def tick(self) -> int:
        """The tick to read under: take it before the read, so a commit after it refuses the entry."""
        with self._lock:
            return self._tick

    def get_many(self, tenant: str, nodes: Iterable[MemoryNode]) -> tuple[dict[int, Pair], list[MemoryNode]]:
        """The pairs still valid for ``nodes`` (the tenant's only), and the nodes left to read."""
        found: dict[int, Pair] = {}
        missing: list[MemoryNode] = []
        mine = [n for n in nodes if n.tenant == tenant]
        held, _absent = self._pairs.get_many(n.id for n in mine)
        with self._lock:
            for node in mine:
                entry = held.get(node.id)
                if (entry is not None and entry[1] == node.tenant and entry[2] == node.session
                        and self._written.get((node.tenant, node.session), self._floor) <= entry[0]):
                    found[node.id] = entry[3]
                else:
                    missing.append(node)
        return found, missing

    def put_many(self, tick: int, nodes: Iterable[MemoryNode], pairs: Mapping[int, Pair]) -> None:
        """Keep what a read taken at ``tick`` found."""
        for node in nodes:
            if node.id in pairs:
                self._pairs.put(node.id, (tick, node.tenant, node.session, pairs[node.id]))

    def written(self, sessions: Iterable[tuple[str, str]]) -> None:
        """A commit wrote or erased memories of ``sessions``: their entries read before it are stale."""
        wanted = set(sessions)
        if not wanted:
            return
        with self._lock:
            self._tick += 1
            for key in wanted:
                self._written[key] = self._tick
                self._written.move_to_end(key)
            while len(self._written) > self._sessions_kept:
                _key, dropped = self._written.popitem(last=False)
                self._floor = max(self._floor, dropped)

    def clear(self) -> None:
        """Forget everything (the file may have changed underneath): every older entry is refused."""
        with self._lock:
            self._tick += 1
            self._floor = self._tick
            self._written.clear()
        self._pairs.clear()
