"""The SQLite store's :class:`graph.api.Journal`: the intents crash recovery replays. One process owns
the file, so every entry is its own: nothing to claim from another."""

from __future__ import annotations

from collections.abc import Iterable

from graph.api import Journal, JournalEntry
from graph.sqlite.queries import SqliteQueries


class SqliteJournal(Journal):
    """The pending intents, oldest first."""

    def __init__(self, q: SqliteQueries) -> None:
        self.q = q

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        rows = self.q.all("SELECT seq, op, tenant, item_id, created_us FROM journal ORDER BY seq LIMIT ?",
                          (-1 if limit is None else limit,))
        return [JournalEntry(int(s), str(o), str(t), str(i), int(c)) for s, o, t, i, c in rows]

    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        return sorted(seqs)  # one process owns the file: every entry is its own

    def journal_size(self) -> int:
        return int(self.q.one("SELECT count(*) FROM journal", ())[0])
