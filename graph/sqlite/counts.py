"""The SQLite store's :class:`graph.api.Counts`: the counts the write transaction keeps in the ``counts``
table (tenant, scope, key, n), with the keys of :func:`graph.keys.count_keys`: never a scan of the rows."""

from __future__ import annotations

from graph.api import Counts, SessionStats, Timeline
from graph.keys import SEP
from graph.sqlite.queries import SqliteQueries


class SqliteCounts(Counts):
    """Kept counts by tenant, session, day and private author; ``timeline`` gives each session's bounds."""

    def __init__(self, q: SqliteQueries, timeline: Timeline) -> None:
        self.q = q
        self.timeline = timeline

    def kept(self, tenant: str, scope: str, key: str) -> int:
        """One kept count (0 when absent): the read every count of the store comes down to."""
        row = self.q.one("SELECT n FROM counts WHERE tenant = ? AND scope = ? AND key = ?", (tenant, scope, key))
        return 0 if row is None else int(row[0])

    def count(self, tenant: str, session: str | None = None, *, turns_only: bool = False) -> int:
        if session is None:
            return self.kept(tenant, "all", "") - (self.kept(tenant, "nonturn", "") if turns_only else 0)
        return self.kept(tenant, "turns" if turns_only else "session", session)

    def counts_by_day(self, tenant: str, first_day: int, days: int) -> list[int]:
        rows = self.q.all("SELECT key, n FROM counts WHERE tenant = ? AND scope = 'day' AND key >= ? AND key < ?",
                          (tenant, f"{first_day:08d}", f"{first_day + days:08d}"))
        found = {int(k): int(n) for k, n in rows}
        return [found.get(first_day + i, 0) for i in range(days)]

    def sessions(self, tenant: str) -> list[SessionStats]:
        counts = self.q.all("SELECT scope, key, n FROM counts WHERE tenant = ? AND scope IN ('session', 'turns') "
                            "AND n > 0", (tenant,))
        memories = {k: int(n) for scope, k, n in counts if scope == "session"}
        turns = {k: int(n) for scope, k, n in counts if scope == "turns"}
        out = []
        for session in sorted(memories):
            b = self.timeline.bounds(tenant, session)
            out.append(SessionStats(session, memories[session], turns.get(session, 0), b[0] if b else None,
                                    b[1] if b else None))
        return out

    def hidden_count(self, tenant: str, session: str, viewer: str | None) -> int:
        rows = self.q.all("SELECT key, n FROM counts WHERE tenant = ? AND scope = 'private' AND key >= ? AND key < ?",
                          (tenant, session + SEP, session + chr(0x20)))
        return sum(int(n) for key, n in rows if key.split(SEP, 1)[1] != viewer)

    def non_turn_count(self, tenant: str) -> int:
        return self.kept(tenant, "nonturn", "")

    def private_count(self, tenant: str) -> int:
        row = self.q.one("SELECT coalesce(sum(n), 0) FROM counts WHERE tenant = ? AND scope = 'private'", (tenant,))
        return int(row[0])
