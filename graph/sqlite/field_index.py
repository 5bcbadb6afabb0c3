"""The SQLite store's :class:`graph.api.FieldIndex`: memories by an indexed field (type, agent,
channel) or a source-id prefix, newest first off the field's own index; counts from the kept ones."""

from __future__ import annotations

from graph.api import INDEXED_FIELDS, FieldIndex
from graph.keys import SEP
from graph.sqlite.counts import SqliteCounts
from graph.sqlite.queries import SqliteQueries


def _indexed(field: str) -> str:
    if field not in INDEXED_FIELDS:
        raise ValueError(f"not an indexed field: {field}")
    return field


class SqliteFieldIndex(FieldIndex):
    """Listings and counts by field; ``counts`` reads the kept counts of each value."""

    def __init__(self, q: SqliteQueries, counts: SqliteCounts) -> None:
        self.q = q
        self.counts = counts

    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        field = _indexed(field)
        rows = self.q.all(f"SELECT id FROM memories INDEXED BY memories_{field} WHERE tenant = ? AND {field} = ? "
                          "ORDER BY ts_us DESC, id DESC "
                          "LIMIT ?", (tenant, value, -1 if limit is None else limit))
        return [int(r[0]) for r in rows]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        return self.counts.kept(tenant, _indexed(field), value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        rows = self.q.all("SELECT key, n FROM counts WHERE tenant = ? AND scope = ? AND n > 0 ORDER BY key",
                          (tenant, _indexed(field)))
        return {str(k): int(n) for k, n in rows}

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        rows = self.q.all("SELECT id FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                          "AND source_id < ? "
                          "ORDER BY source_id, id LIMIT ?", (tenant, prefix, prefix + chr(0x10FFFF),
                                                             -1 if limit is None else limit))
        return [int(r[0]) for r in rows if r[0] is not None]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        row = self.q.one("SELECT count(*) FROM memories INDEXED BY memories_source WHERE tenant = ? AND source_id >= ? "
                         "AND source_id < ?",
                         (tenant, prefix, prefix + chr(0x10FFFF)))
        return int(row[0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self.q.all("SELECT key FROM counts WHERE tenant = ? AND scope = 'schan' AND key >= ? AND key < ? "
                          "AND n > 0", (tenant, channel + SEP, channel + chr(0x20)))
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self.counts.kept(tenant, "schan", f"{channel}{SEP}{session}") > 0
