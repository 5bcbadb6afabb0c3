"""The PostgreSQL store's :class:`graph.api.FieldIndex`: memories by an indexed field (type, agent,
channel) or a source-id prefix (compared code point by code point, as SQLite does: COLLATE "C");
counts from the kept ones."""

from __future__ import annotations

from psycopg import sql

from graph.api import FieldIndex
from graph.keys import SEP
from graph.pg.counts import PgCounts
from graph.pg.queries import PgQueries
from graph.pg.rows import check_field, like_prefix


class PgFieldIndex(FieldIndex):
    """Listings and counts by field; ``counts`` reads the kept counts of each value."""

    def __init__(self, q: PgQueries, counts: PgCounts) -> None:
        self.q = q
        self.counts = counts

    def field_ids(self, tenant: str, field: str, value: str, limit: int | None) -> list[int]:
        q = sql.SQL("SELECT id FROM memories WHERE tenant = %s AND {} = %s ORDER BY ts_us DESC, id DESC LIMIT %s")
        return [int(r[0]) for r in self.q.rows(q.format(check_field(field)), [tenant, value, limit])]

    def field_count(self, tenant: str, field: str, value: str) -> int:
        check_field(field)
        return self.counts.kept(tenant, field, value)

    def field_counts(self, tenant: str, field: str) -> dict[str, int]:
        check_field(field)
        rows = self.q.rows("SELECT key, n FROM counts WHERE tenant = %s AND scope = %s AND n > 0 "
                           'ORDER BY key COLLATE "C"', [tenant, field])
        return {str(k): int(n) for k, n in rows}

    def source_prefix_ids(self, tenant: str, prefix: str, limit: int | None) -> list[int]:
        """(source_id, id) order, code point by code point as SQLite compares (COLLATE "C")."""
        rows = self.q.rows('SELECT id FROM memories WHERE tenant = %s AND source_id LIKE %s '
                           'ORDER BY source_id COLLATE "C", id LIMIT %s', [tenant, like_prefix(prefix), limit])
        return [int(r[0]) for r in rows]

    def source_prefix_count(self, tenant: str, prefix: str) -> int:
        rows = self.q.rows("SELECT count(*) FROM memories WHERE tenant = %s AND source_id LIKE %s",
                           [tenant, like_prefix(prefix)])
        return int(rows[0][0])

    def sessions_in_channel(self, tenant: str, channel: str) -> set[str]:
        rows = self.q.rows("SELECT key FROM counts WHERE tenant = %s AND scope = 'schan' AND starts_with(key, %s) "
                           "AND n > 0", [tenant, channel + SEP])
        return {str(r[0]).split(SEP, 1)[1] for r in rows}

    def session_has_channel(self, tenant: str, session: str, channel: str) -> bool:
        return self.counts.kept(tenant, "schan", f"{channel}{SEP}{session}") > 0
