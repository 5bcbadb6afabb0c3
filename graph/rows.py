"""Rows of the graph's tables as the seam's frozen values."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from graph.api import EpisodeNode, MemoryNode

MEMORY_COLUMNS = (
    "id", "tenant", "session", "agent", "type", "role", "channel", "source", "source_id", "project_id",
    "salience", "visibility", "ts_us", "metadata", "content", "content_len", "content_hash", "idempotency_key",
    "supersedes_id", "valid_to_us", "locked",
)
NODE_COLUMNS = tuple(c for c in MEMORY_COLUMNS if c not in ("content", "idempotency_key"))
NODE_SELECT = ", ".join(NODE_COLUMNS)
EPISODE_COLUMNS = (
    "id", "tenant", "session", "summary", "summary_source", "summary_error", "first_id", "last_id",
    "turn_count", "last_ts_us", "handoff_id", "created_us", "updated_us",
)
EPISODE_SELECT = ", ".join(EPISODE_COLUMNS)


def _frozen(value: Any) -> Mapping[str, Any]:
    if isinstance(value, str):
        value = json.loads(value)
    return MappingProxyType(dict(value))


def node_from_row(row: Mapping[str, Any] | tuple[Any, ...]) -> MemoryNode:
    """A MemoryNode from a row of NODE_COLUMNS (a tuple in that order, or a mapping with them)."""
    values = dict(zip(NODE_COLUMNS, row, strict=True)) if isinstance(row, tuple) else {c: row[c] for c in NODE_COLUMNS}
    values["source"] = _frozen(values["source"])
    values["metadata"] = _frozen(values["metadata"])
    values["locked"] = bool(values["locked"])
    return MemoryNode(**values)


def episode_from_row(row: tuple[Any, ...] | Mapping[str, Any]) -> EpisodeNode:
    values = dict(zip(EPISODE_COLUMNS, row, strict=True)) if isinstance(row, tuple) else {
        c: row[c] for c in EPISODE_COLUMNS}
    return EpisodeNode(**values)
