"""Columns, row → frozen value conversion and RowFilter → SQL for the PostgreSQL backend."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

from psycopg import Cursor, sql

from graph.api import INDEXED_FIELDS, MEMORY_NODE_COLUMNS, EpisodeNode, MemoryNode, MemoryRecord, RowFilter

NODE_COLUMNS = MEMORY_NODE_COLUMNS
EPISODE_COLUMNS = (
    "id", "tenant", "session", "summary", "summary_source", "summary_error", "first_id", "last_id",
    "turn_count", "last_ts_us", "handoff_id", "created_us", "updated_us",
)
NODE_SELECT = ", ".join(f"m.{c}" for c in NODE_COLUMNS)
EPISODE_SELECT = ", ".join(EPISODE_COLUMNS)
_SOURCE, _METADATA, _FLAGS = (NODE_COLUMNS.index(c) for c in ("source", "metadata", "flags"))


def scalar(cur: Cursor[Any]) -> Any:
    """The first column of the one row a query always returns (count, exists)."""
    row = cur.fetchone()
    if row is None:
        raise LookupError("the query returned no row")
    return row[0]


def _frozen_json(text: str) -> Mapping[str, Any]:
    return MappingProxyType(json.loads(text))


def memory_node(row: Sequence[Any]) -> MemoryNode:
    """A MemoryNode from a row selected with :data:`NODE_SELECT`."""
    a = dict(zip(NODE_COLUMNS, row, strict=True))
    a["source"] = _frozen_json(a["source"])
    a["metadata"] = _frozen_json(a["metadata"])
    a["id"], a["ts_us"], a["salience"] = int(a["id"]), int(a["ts_us"]), float(a["salience"])
    a["locked"] = bool(a["locked"])
    a["flags"] = tuple(json.loads(a["flags"])) if a["flags"] and a["flags"] != "[]" else ()
    return MemoryNode(**a)


def episode_node(row: Sequence[Any]) -> EpisodeNode:
    return EpisodeNode(**dict(zip(EPISODE_COLUMNS, row, strict=True)))


def memory_values(record: MemoryRecord) -> list[Any]:
    """The values of :data:`graph.api.MEMORY_COLUMNS` for an INSERT (source and metadata as JSON text)."""
    node = record.node
    values: list[Any] = [getattr(node, c) for c in NODE_COLUMNS]
    values[_SOURCE] = json.dumps(dict(node.source), ensure_ascii=False)
    values[_METADATA] = json.dumps(dict(node.metadata), ensure_ascii=False)
    values[_FLAGS] = json.dumps(list(node.flags))
    return [*values, record.content, record.idempotency_key]


def check_field(field: str) -> sql.Identifier:
    if field not in INDEXED_FIELDS:
        raise ValueError(f"field must be one of {', '.join(INDEXED_FIELDS)}, not {field!r}")
    return sql.Identifier(field)


def like_prefix(prefix: str) -> str:
    """A LIKE pattern matching strings that start with ``prefix`` (its % _ and \\ are literal)."""
    return re.sub(r"([\\%_])", r"\\\1", prefix) + "%"


def filter_sql(f: RowFilter, alias: str = "m") -> tuple[sql.Composable, list[Any]]:
    """A WHERE clause over ``memories <alias>`` for the filter (tenant and visibility included)."""
    col = lambda name: sql.Identifier(alias, name)  # noqa: E731
    parts: list[sql.Composable] = [sql.SQL("{} = %s").format(col("tenant"))]
    args: list[Any] = [f.tenant]
    for key in ("type", "session", "agent", "channel"):
        value = getattr(f, key)
        if value:
            parts.append(sql.SQL("{} = %s").format(col(key)))
            args.append(value)
    if f.source_prefix:
        parts.append(sql.SQL("{} LIKE %s").format(col("source_id")))  # backslash is LIKE's default escape
        args.append(like_prefix(f.source_prefix))
    if f.project is not None:
        if f.project == "":
            parts.append(sql.SQL("{} IS NULL").format(col("project_id")))
        else:
            parts.append(sql.SQL("({0} IS NULL OR {0} = %s)").format(col("project_id")))
            args.append(f.project)
    parts.append(sql.SQL("({} = 'tenant' OR {} = %s)").format(col("visibility"), col("agent")))
    args.append(f.viewer or "\x01")  # no agent is named \x01 (names are validated)
    parts.append(sql.SQL("{} IS NULL").format(col("archived_us")))  # out of recall (retention, consolidation)
    return sql.SQL(" AND ").join(parts), args
