"""Ordered (timestamp, id) keys per (tenant, session): pages in O(log n + k)."""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterator

Key = tuple[int, int]  # (timestamp in µs, memory id)


class SessionIndex:
    """Sorted keys per (tenant, session); one index for all memories, one for turns only."""

    def __init__(self) -> None:
        self._keys: dict[tuple[str, str], list[Key]] = {}

    def add(self, tenant: str, session: str, key: Key) -> None:
        keys = self._keys.setdefault((tenant, session), [])
        if not keys or keys[-1] < key:
            keys.append(key)  # the common case: a new row is the newest
        else:
            insort(keys, key)

    def remove(self, tenant: str, session: str, key: Key) -> None:
        keys = self._keys.get((tenant, session))
        if not keys:
            return
        i = bisect_left(keys, key)
        if i < len(keys) and keys[i] == key:
            del keys[i]
        if not keys:
            del self._keys[(tenant, session)]

    def bulk_load(self, tenant: str, session: str, keys: list[Key]) -> None:
        self._keys[(tenant, session)] = sorted(keys)

    def newest_before(
        self, tenant: str, session: str, before: Key | None, accept: Callable[[int], bool]
    ) -> Iterator[Key]:
        """Keys strictly older than ``before`` (or all), newest first, that ``accept`` admits."""
        keys = self._keys.get((tenant, session), [])
        i = len(keys) if before is None else bisect_left(keys, before)
        while i > 0:
            i -= 1
            key = keys[i]
            if accept(key[1]):
                yield key

    def neighbours(self, tenant: str, session: str, key: Key) -> tuple[Key | None, Key | None]:
        keys = self._keys.get((tenant, session), [])
        i = bisect_left(keys, key)
        if i >= len(keys) or keys[i] != key:
            return None, None
        prev = keys[i - 1] if i > 0 else None
        nxt = keys[i + 1] if i + 1 < len(keys) else None
        return prev, nxt

    def count_before(self, tenant: str, session: str, key: Key) -> int:
        """How many keys sort before ``key``: ``(day_start_us, 0)`` counts the rows before a day."""
        return bisect_left(self._keys.get((tenant, session), []), key)

    def count(self, tenant: str, session: str) -> int:
        return len(self._keys.get((tenant, session), []))

    def sessions(self, tenant: str) -> list[str]:
        return sorted(s for (t, s) in self._keys if t == tenant)

    def bounds(self, tenant: str, session: str) -> tuple[Key, Key] | None:
        keys = self._keys.get((tenant, session))
        return (keys[0], keys[-1]) if keys else None
