"""Per-tenant indexes of memory ids by field value and source-id prefix, and of channels per session.

Recall enumerates the rows a selective filter admits from here (a rare ``type`` holds a few
ids out of 100k, so scoring those few exactly beats a metadata-filtered vector scan), and
scopes episodes under a ``channel`` filter to sessions that hold memories in that channel.
Kept by :class:`graph.store.GraphStore` at load and on every apply/unapply, under its lock.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from typing import Any

INDEXED_FIELDS = ("type", "agent", "channel")
_EMPTY: frozenset[int] = frozenset()


_TOP = chr(0x10FFFF)  # sorts after every character a source id continues a prefix with


class FieldIndex:
    """Built by :meth:`add` calls then :meth:`loaded` (one sort), kept by :meth:`add`/:meth:`remove`."""

    def __init__(self) -> None:
        self._loading = True
        self._sources: dict[str, list[tuple[str, int]]] = {}  # tenant -> sorted (source_id, memory id)
        self._ids: dict[tuple[str, str, str], set[int]] = {}  # (tenant, field, value) -> memory ids
        self._channels: dict[str, dict[str, Counter[str]]] = {}  # tenant -> session -> channel -> rows

    def loaded(self) -> FieldIndex:
        for keys in self._sources.values():
            keys.sort()
        self._loading = False
        return self

    def add(self, attrs: dict[str, Any]) -> None:
        tenant, mem_id = attrs["tenant"], attrs["id"]
        if source_id := attrs.get("source_id"):
            keys = self._sources.setdefault(tenant, [])
            if self._loading:
                keys.append((source_id, mem_id))
            else:
                insort(keys, (source_id, mem_id))
        for field in INDEXED_FIELDS:
            if value := attrs.get(field):
                self._ids.setdefault((tenant, field, value), set()).add(mem_id)
        if (channel := attrs.get("channel")) and attrs.get("visibility") == "tenant":
            self._channels.setdefault(tenant, {}).setdefault(attrs["session"], Counter())[channel] += 1

    def remove(self, attrs: dict[str, Any]) -> None:
        tenant, mem_id = attrs["tenant"], attrs["id"]
        keys = self._sources.get(tenant)
        if (source_id := attrs.get("source_id")) and keys:
            i = bisect_left(keys, (source_id, mem_id))
            if i < len(keys) and keys[i] == (source_id, mem_id):
                del keys[i]
        for field in INDEXED_FIELDS:
            key = (tenant, field, attrs.get(field) or "")
            if (ids := self._ids.get(key)) is not None:
                ids.discard(mem_id)
                if not ids:
                    del self._ids[key]
        channel, sessions = attrs.get("channel"), self._channels.get(tenant, {})
        counter = sessions.get(attrs["session"])
        if channel and attrs.get("visibility") == "tenant" and counter is not None:
            counter[channel] -= 1
            if counter[channel] <= 0:
                del counter[channel]
            if not counter:
                del sessions[attrs["session"]]

    def ids(self, tenant: str, field: str, value: str) -> frozenset[int] | set[int]:
        """The tenant's memory ids whose ``field`` (one of :data:`INDEXED_FIELDS`) equals ``value``:
        the live set (read it under the store lock; never change it)."""
        return self._ids.get((tenant, field, value)) or _EMPTY

    def source_range(self, tenant: str, prefix: str) -> tuple[int, int]:
        """The slice of the tenant's sorted source ids that start with ``prefix`` (O(log n))."""
        keys = self._sources.get(tenant, [])
        return bisect_left(keys, (prefix, -1)), bisect_left(keys, (prefix + _TOP, -1))

    def with_source_prefix(self, tenant: str, prefix: str) -> list[int]:
        """Memory ids whose source id starts with ``prefix``."""
        lo, hi = self.source_range(tenant, prefix)
        return [mem_id for _s, mem_id in self._sources.get(tenant, [])[lo:hi]]

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        """Sessions of the tenant holding at least one shared memory written in ``channel``
        (private rows do not count: an episode must not tell of another agent's private rows)."""
        return {s for s, counts in self._channels.get(tenant, {}).items() if counts.get(channel)}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        """Whether the session holds a shared memory written in ``channel``."""
        counts = self._channels.get(tenant, {}).get(session)
        return bool(counts and counts.get(channel))
