"""Rows of the graph's tables as the seam's frozen values, and a memory record as the values of its row."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from graph.api import MEMORY_NODE_COLUMNS, EpisodeNode, MemoryNode, MemoryRecord

NODE_COLUMNS = MEMORY_NODE_COLUMNS  # in MemoryNode's order: node_from_row reads a tuple positionally
NODE_SELECT = ", ".join(NODE_COLUMNS)
EPISODE_COLUMNS = (
    "id", "tenant", "session", "summary", "summary_source", "summary_error", "first_id", "last_id",
    "turn_count", "last_ts_us", "handoff_id", "created_us", "updated_us",
)
EPISODE_SELECT = ", ".join(EPISODE_COLUMNS)


_EMPTY: Mapping[str, Any] = MappingProxyType({})
_SOURCE, _METADATA, _LOCKED, _FLAGS = (NODE_COLUMNS.index(c) for c in ("source", "metadata", "locked", "flags"))


def _frozen(value: Any) -> Mapping[str, Any]:
    if value == "{}" or value == {}:  # most rows: one shared read-only empty mapping, no JSON parse
        return _EMPTY
    if isinstance(value, str):
        value = json.loads(value)
    return MappingProxyType(dict(value))


def node_from_row(row: Mapping[str, Any] | tuple[Any, ...]) -> MemoryNode:
    """A MemoryNode from a row of NODE_COLUMNS (a tuple in that order, or a mapping with them).
    Recall builds one per candidate (~200 a query), so the tuple case is positional."""
    if isinstance(row, tuple):
        if len(row) != len(NODE_COLUMNS):
            raise ValueError(f"a node row has {len(NODE_COLUMNS)} columns, not {len(row)}")
        values = list(row)
        values[_SOURCE] = _frozen(values[_SOURCE])
        values[_METADATA] = _frozen(values[_METADATA])
        values[_LOCKED] = bool(values[_LOCKED])
        values[_FLAGS] = flags_from_text(values[_FLAGS])
        return MemoryNode(*values)
    named = {c: row[c] for c in NODE_COLUMNS}
    named["source"] = _frozen(named["source"])
    named["metadata"] = _frozen(named["metadata"])
    named["locked"] = bool(named["locked"])
    named["flags"] = flags_from_text(named["flags"])
    return MemoryNode(**named)


def flags_from_text(value: Any) -> tuple[str, ...]:
    """The stored flags column (a JSON array; ``[]`` on most rows) as the node's tuple."""
    if not value or value == "[]":
        return ()
    return tuple(json.loads(value)) if isinstance(value, str) else tuple(value)


def memory_values(record: MemoryRecord) -> list[Any]:
    """The values of :data:`graph.api.MEMORY_COLUMNS` for an INSERT: source and metadata as JSON text, locked as 0/1."""
    node = record.node
    values: list[Any] = [getattr(node, c) for c in NODE_COLUMNS]
    values[_SOURCE] = json.dumps(dict(node.source), ensure_ascii=False)
    values[_METADATA] = json.dumps(dict(node.metadata), ensure_ascii=False)
    values[_LOCKED] = int(node.locked)
    values[_FLAGS] = json.dumps(list(node.flags))
    return [*values, record.content, record.idempotency_key]


def cached_node(node: MemoryNode) -> MemoryNode:
    """``node`` as the reads build it (read-only source and metadata): what the store's caches keep."""
    return replace(node, source=_frozen(node.source), metadata=_frozen(node.metadata))


def episode_from_row(row: tuple[Any, ...] | Mapping[str, Any]) -> EpisodeNode:
    values = dict(zip(EPISODE_COLUMNS, row, strict=True)) if isinstance(row, tuple) else {
        c: row[c] for c in EPISODE_COLUMNS}
    return EpisodeNode(**values)
