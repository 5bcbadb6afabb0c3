"""The counts the PostgreSQL store keeps in each write transaction, their recount from the rows, and
their reads (:class:`PgCounts`, the store's :class:`graph.api.Counts`).

Four tables hold them: ``tenant_state`` (memories, non-turn rows and the lexical length sum
per tenant, beside its change counter), ``session_counts`` (memories and turns per session),
``private_counts`` (private rows per session and author) and ``counts`` (tenant, scope, key,
n) for the rest: the scopes and keys of ``graph.keys.count_keys`` (the one scheme both backends keep,
mapped onto the tables by :data:`TENANT_STATE`, :data:`SESSION_COUNTS` and :data:`PRIVATE_COUNTS`): ``type``,
``agent``, ``channel``, ``schan`` (channel \\x1f session, shared rows only) and ``day`` (the
UTC day number zero-padded to 8 digits), so field counts, channel sessions and the growth
chart are O(values), never a scan of the rows. Since schema step 9 ``counts`` also keeps, in scope
``mention``, how many memories each viewer sees mention an entity (key: the entity id \\x1f '' for
shared mentions, or \\x1f the author for private ones, as SQLite's step 7), so recall's entity
branch and the entity listing read two keys an entity, never its mention rows.

:data:`KEPT_SQL` and :data:`ACTUAL_SQL` list every count as (tenant, scope, key, n): what is
kept, and what the rows imply. Doctor compares them; :func:`rebuild` makes the first equal
the second.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from psycopg import Connection

from graph.api import Counts, SessionStats
from graph.keys import DAY_US
from graph.pg.queries import PgQueries
from graph.pg.versioned_cache import VersionedCache

_DAY = f"lpad((ts_us / {DAY_US})::text, greatest(8, length((ts_us / {DAY_US})::text)), '0')"

CREATE_SQL = """
CREATE TABLE counts (
    tenant text NOT NULL,
    scope text NOT NULL,
    key text NOT NULL,
    n bigint NOT NULL,
    PRIMARY KEY (tenant, scope, key)
);
"""

# the rows' counts in the scopes of the ``counts`` table
MENTION_SQL = ("SELECT tenant, 'mention', entity_id::text || chr(31) || CASE WHEN shared THEN '' ELSE agent END, "
               "count(*) FROM mentions GROUP BY 1, 2, 3")
SCOPED_SQL = f"""
SELECT tenant, 'type', type, count(*) FROM memories GROUP BY tenant, type
UNION ALL SELECT tenant, 'agent', agent, count(*) FROM memories GROUP BY tenant, agent
UNION ALL SELECT tenant, 'channel', channel, count(*) FROM memories WHERE channel IS NOT NULL GROUP BY tenant, channel
UNION ALL SELECT tenant, 'schan', channel || chr(31) || session, count(*) FROM memories
    WHERE channel IS NOT NULL AND visibility = 'tenant' GROUP BY tenant, channel, session
UNION ALL SELECT tenant, 'day', {_DAY}, count(*) FROM memories GROUP BY tenant, {_DAY}
"""

KEPT_SQL = """
SELECT tenant, 'all', '', memories FROM tenant_state
UNION ALL SELECT tenant, 'nonturn', '', non_turn FROM tenant_state
UNION ALL SELECT tenant, 'lexical length', '', lex_len_sum FROM tenant_state
UNION ALL SELECT tenant, 'session', session, memories FROM session_counts
UNION ALL SELECT tenant, 'turns', session, turns FROM session_counts
UNION ALL SELECT tenant, 'private', session || chr(31) || agent, rows FROM private_counts
UNION ALL SELECT tenant, scope, key, n FROM counts
"""

ACTUAL_SQL = f"""
SELECT tenant, 'all', '', count(*) FROM memories GROUP BY tenant
UNION ALL SELECT tenant, 'nonturn', '', count(*) FROM memories WHERE type <> 'turn' GROUP BY tenant
UNION ALL SELECT tenant, 'lexical length', '', sum(length(tsv_win)) FROM memories GROUP BY tenant
UNION ALL SELECT tenant, 'session', session, count(*) FROM memories GROUP BY tenant, session
UNION ALL SELECT tenant, 'turns', session, count(*) FROM memories WHERE type = 'turn' GROUP BY tenant, session
UNION ALL SELECT tenant, 'private', session || chr(31) || agent, count(*) FROM memories
    WHERE visibility = 'agent' GROUP BY tenant, session, agent
UNION ALL {SCOPED_SQL}
UNION ALL {MENTION_SQL}
"""


# Where the scopes of graph.keys.count_keys live outside the ``counts`` table (every other scope is a row
# of it): a column of ``tenant_state`` or of ``session_counts`` (keyed by the session), or
# ``private_counts`` (keyed by the session and the author, the key's two parts).
TENANT_STATE = {"all": "memories", "nonturn": "non_turn"}
SESSION_COUNTS = {"session": "memories", "turns": "turns"}
PRIVATE_COUNTS = "private"


def rebuild(conn: Connection[Any]) -> None:
    """Recount every tenant's rows inside the caller's transaction. The counter tables are locked
    against concurrent writers' deltas first (SHARE ROW EXCLUSIVE): a writer that has not applied
    its deltas yet applies them after this commits, on top of a recount that did not see its rows;
    one that has waits for its commit, which each statement's snapshot below then sees. Every
    tenant's version moves (cached subgraphs and agent indexes are rebuilt)."""
    conn.execute("LOCK TABLE tenant_state, session_counts, private_counts, counts IN SHARE ROW EXCLUSIVE MODE")
    conn.execute("INSERT INTO tenant_state (tenant) SELECT DISTINCT tenant FROM memories ON CONFLICT DO NOTHING")
    conn.execute(
        "UPDATE tenant_state t SET version = t.version + 1, memories = coalesce(r.memories, 0), "
        "non_turn = coalesce(r.non_turn, 0), lex_len_sum = coalesce(r.lex_len_sum, 0) "
        "FROM tenant_state t2 LEFT JOIN (SELECT tenant, count(*) AS memories, "
        "count(*) FILTER (WHERE type <> 'turn') AS non_turn, sum(length(tsv_win)) AS lex_len_sum "
        "FROM memories GROUP BY tenant) r ON r.tenant = t2.tenant WHERE t.tenant = t2.tenant")
    conn.execute("DELETE FROM session_counts")
    conn.execute("INSERT INTO session_counts (tenant, session, memories, turns) SELECT tenant, session, count(*), "
                 "count(*) FILTER (WHERE type = 'turn') FROM memories GROUP BY tenant, session")
    conn.execute("DELETE FROM private_counts")
    conn.execute("INSERT INTO private_counts (tenant, session, agent, rows) SELECT tenant, session, agent, count(*) "
                 "FROM memories WHERE visibility = 'agent' GROUP BY tenant, session, agent")
    conn.execute("DELETE FROM counts")
    conn.execute(f"INSERT INTO counts (tenant, scope, key, n) {SCOPED_SQL}")
    conn.execute(f"INSERT INTO counts (tenant, scope, key, n) {MENTION_SQL}")


class PgCounts(Counts):
    """Kept counts by tenant, session, day and private author, from the four counter tables; the tenant's
    non-turn count through the replica's versioned cache (recall reads it for every query)."""

    def __init__(self, q: PgQueries, cache: VersionedCache) -> None:
        self.q = q
        self.cache = cache

    def kept(self, tenant: str, scope: str, key: str) -> int:
        """One count of the ``counts`` table (0 when absent)."""
        rows = self.q.rows("SELECT n FROM counts WHERE tenant = %s AND scope = %s AND key = %s", [tenant, scope, key])
        return int(rows[0][0]) if rows else 0

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int:
        if session is None:
            rows = self.q.rows("SELECT memories, memories - non_turn FROM tenant_state WHERE tenant = %s", [tenant])
        else:
            rows = self.q.rows("SELECT memories, turns FROM session_counts WHERE tenant = %s AND session = %s",
                               [tenant, session])
        return int(rows[0][1 if turns_only else 0]) if rows else 0

    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        rows = self.q.rows("SELECT key, n FROM counts WHERE tenant = %s AND scope = 'day' AND key >= %s AND key < %s",
                           [tenant, f"{first_day:08d}", f"{first_day + days:08d}"])
        found = {int(k): int(n) for k, n in rows}
        return [found.get(first_day + i, 0) for i in range(days)]

    def sessions(self, tenant: str) -> list[SessionStats]:
        rows = self.q.rows(
            "SELECT s.session, s.memories, s.turns, f.ts_us, f.id, l.ts_us, l.id FROM session_counts s "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us, id LIMIT 1) f ON true "
            "LEFT JOIN LATERAL (SELECT ts_us, id FROM memories m WHERE m.tenant = s.tenant AND m.session = s.session "
            "ORDER BY ts_us DESC, id DESC LIMIT 1) l ON true "
            "WHERE s.tenant = %s AND s.memories > 0 ORDER BY s.session", [tenant])
        return [SessionStats(str(r[0]), int(r[1]), int(r[2]), None if r[3] is None else (int(r[3]), int(r[4])),
                             None if r[5] is None else (int(r[5]), int(r[6]))) for r in rows]

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        rows = self.q.rows("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s AND session = %s "
                           "AND agent IS DISTINCT FROM %s", [tenant, session, viewer])
        return int(rows[0][0])

    def non_turn_count(self, tenant: str) -> int:
        def fetch(conn: Connection[Any]) -> dict[Hashable, Any]:
            row = conn.execute("SELECT non_turn FROM tenant_state WHERE tenant = %s", [tenant]).fetchone()
            return {"": int(row[0]) if row else 0}

        return int(self.cache.values(tenant, "non_turn", [""], fetch)[""])

    def private_count(self, tenant: str) -> int:
        rows = self.q.rows("SELECT coalesce(sum(rows), 0) FROM private_counts WHERE tenant = %s", [tenant])
        return int(rows[0][0])
