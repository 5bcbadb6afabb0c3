"""The SQLite graph store's reads by indexed field (type, agent, channel, source prefix) and the
per-field counts its write transaction keeps; mixed into :class:`graph.sqlite.store.SqliteGraphStore`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graph.api import INDEXED_FIELDS
from graph.keys import SEP


class SqliteFieldReads:
    def _all(self, sql: str, args: Sequence[Any], *, tuples: bool = False) -> list[Any]:
        raise NotImplementedError

    def _one(self, sql: str, args: Sequence[Any]) -> Any:
        raise NotImplementedError

    def _count(self, tenant: str, scope: str, key: str) -> int:
        raise NotImplementedError

    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        rows = self._all(f"SELECT id FROM memories INDEXED BY memories_{field} WHERE tenant = ? AND {field} = ? "
                         "ORDER BY ts_us DESC, id DESC "
                         "LIMIT ?", (tenant, value, -1 if limit is None else limit))
        return [int(r[0]) for r in rows]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        return self._count(tenant, field, value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        if field not in INDEXED_FIELDS:
            raise ValueError(f"not an indexed field: {field}")
        rows = self._all("SELECT key, n FROM counts WHERE tenant = ? AND scope = ? AND n > 0 ORDER BY key",
                         (tenant, field))
        return {str(k): int(n) for k, n in rows}

    def private_count(self, tenant: str) -> int:
        row = self._one("SELECT coalesce(sum(n), 0) FROM counts WHERE tenant = ? AND scope = 'private'", (tenant,))
        return int(row[0])

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        rows = self._all("SELECT id FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                         "AND source_id < ? "
                         "ORDER BY source_id, id LIMIT ?", (tenant, prefix, prefix + chr(0x10FFFF),
                                                            -1 if limit is None else limit))
        return [int(r[0]) for r in rows if r[0] is not None]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        row = self._one("SELECT count(*) FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                        "AND source_id < ?",
                        (tenant, prefix, prefix + chr(0x10FFFF)))
        return int(row[0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self._all("SELECT key FROM counts WHERE tenant = ? AND scope = 'schan' AND key >= ? AND key < ? "
                         "AND n > 0", (tenant, channel + SEP, channel + chr(0x20)))
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self._count(tenant, "schan", f"{channel}{SEP}{session}") > 0
