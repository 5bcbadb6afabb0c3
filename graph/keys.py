"""The keys of the counts every backend keeps in each write transaction: one scheme, two stores.

Each memory adds one to a (scope, key) count per field it is filed under (:func:`count_keys`), so
field counts, channel sessions and the growth chart are O(values), never a scan of the rows.
SQLite (:mod:`graph.sqlite.txn`) and PostgreSQL (:mod:`graph.pg.txn`, onto the tables of
:mod:`graph.pg.counts`) both write the keys these functions give.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DAY_US = 86_400_000_000  # one UTC day in microseconds
SEP = "\x1f"  # joins the parts of a compound key (channel, session; session, agent)


def day_key(ts_us: int) -> str:
    """The 'day' count's key: the UTC day number, zero-padded so keys sort as days do."""
    return f"{ts_us // DAY_US:08d}"


def count_keys(row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (scope, key) counts one memory adds to (graph.sqlite.migrations.COUNT_SCOPES_SQL rebuilds the same)."""
    session, channel = row["session"], row["channel"]
    keys = [("all", ""), ("session", session), ("type", row["type"]), ("agent", row["agent"]),
            ("day", day_key(row["ts_us"]))]
    keys.append(("turns", session) if row["type"] == "turn" else ("nonturn", ""))
    if row["visibility"] == "agent":
        keys.append(("private", f"{session}{SEP}{row['agent']}"))
    if channel:
        keys.append(("channel", channel))
        if row["visibility"] == "tenant":
            keys.append(("schan", f"{channel}{SEP}{session}"))
    return keys


def mention_key(entity_id: int, shared: bool, agent: str) -> str:
    """The 'mention' count's key of one mention row: the entity id, then '' (a shared memory's mention)
    or the private memory's author (SQLite keeps it by trigger, graph.sqlite.entities.MENTION_COUNT_KEY)."""
    return f"{entity_id}{SEP}{'' if shared else agent}"


