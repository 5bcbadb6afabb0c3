"""The keys of the counts every backend keeps in each write transaction: one scheme, two stores.

Each memory adds one to a (scope, key) count per field it is filed under (:func:`count_keys`), so
field counts, channel sessions and the growth chart are O(values), never a scan of the rows.
SQLite (:mod:`graph.sqlite.txn`) and PostgreSQL (:mod:`graph.pg.txn`, onto the tables of
:mod:`graph.pg.counts`) both write the keys these functions give.
"""

from __future__ import annotations

DAY_US = 86_400_000_000  # one UTC day in microseconds
SEP = "\x1f"  # joins the parts of a compound key (channel, session; session, agent)


def day_key(ts_us: int) -> str:
    """The 'day' count's key: the UTC day number, zero-padded so keys sort as days do."""
    return f"{ts_us // DAY_US:08d}"


def count_keys(session: str, type: str, agent: str, channel: str | None, visibility: str,
               ts_us: int) -> list[tuple[str, str]]:
    """The (scope, key) counts one memory adds to (graph.sqlite.migrations.COUNT_SCOPES_SQL rebuilds the same)."""
    keys = [("all", ""), ("session", session), ("type", type), ("agent", agent), ("day", day_key(ts_us))]
    keys.append(("turns", session) if type == "turn" else ("nonturn", ""))
    if visibility == "agent":
        keys.append(("private", f"{session}{SEP}{agent}"))
    if channel:
        keys.append(("channel", channel))
        if visibility == "tenant":
            keys.append(("schan", f"{channel}{SEP}{session}"))
    return keys


def mention_key(entity_id: int, shared: bool, agent: str) -> str:
    """The 'mention' count's key of one mention row: the entity id, then '' (a shared memory's mention)
    or the private memory's author (SQLite keeps it by trigger, graph.sqlite.entities.MENTION_COUNT_KEY)."""
    return f"{entity_id}{SEP}{'' if shared else agent}"


