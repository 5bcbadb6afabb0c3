"""The PostgreSQL store's :class:`graph.api.Journal`: the intents crash recovery replays, shared by every
replica and leased to the one that wrote (or took over) each.

A replica's *heartbeat* thread renews its entries' leases every ``lease_s / 3`` seconds until
:meth:`PgJournal.stop`. :meth:`PgJournal.journal` lists what this replica may act on: its own entries
and those whose owner's lease has expired (that replica is gone); :meth:`PgJournal.claim_journal` takes
such entries over atomically before recovery acts on them. ``succeeds`` (an owner suffix) names the
processes this one replaced: a process that holds a data directory's lock (PostgreSQL with embedded
Chroma) knows the last holder is gone, so entries written under that directory's suffix are its own at
once, whatever their lease says.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psycopg

from graph.api import GraphStoreError, Journal, JournalEntry
from graph.pg.queries import PgQueries
from graph.pg.rows import scalar


@dataclass(frozen=True, slots=True)
class LeasedJournalEntry(JournalEntry):
    """A journal entry with the replica that owns it (wrote it, or took it over)."""

    owner: str = ""


class PgJournal(Journal):
    """The shared journal as replica ``owner`` sees it; its heartbeat runs from construction to :meth:`stop`."""

    def __init__(self, q: PgQueries, *, owner: str, lease_s: float, succeeds: str | None) -> None:
        self.q = q
        self.owner, self.lease_s, self.succeeds = owner, lease_s, succeeds
        self._stop = threading.Event()
        self._heartbeat = threading.Thread(target=self._beat, name=f"memcore-lease-{owner}", daemon=True)
        self._heartbeat.start()

    def heartbeat(self) -> int:
        """Renew the leases of this owner's journal entries; called by the journal's own thread every
        ``lease_s / 3`` s (callers need not). Returns how many entries were renewed."""
        def renew(conn: psycopg.Connection[Any]) -> int:
            cur = conn.execute("UPDATE journal SET lease_until = clock_timestamp() + make_interval(secs => %s) "
                               "WHERE owner = %s", [self.lease_s, self.owner])
            return cur.rowcount
        return self.q.run(renew, "heartbeat")

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self.heartbeat()
            except GraphStoreError:  # the next beat tries again; an expired lease only lets others recover
                continue

    def stop(self, timeout_s: float) -> None:
        """Stop the heartbeat (idempotent; from the heartbeat's own thread, without waiting for it)."""
        self._stop.set()
        if self._heartbeat.is_alive() and threading.current_thread() is not self._heartbeat:
            self._heartbeat.join(timeout=timeout_s)

    def _actionable(self) -> tuple[str, list[Any]]:
        """The SQL condition (and its parameters) for entries this replica may act on: its own,
        those whose lease expired, and those of the processes it succeeds (see ``succeeds``)."""
        if self.succeeds is None:
            return "(owner = %s OR lease_until < clock_timestamp())", [self.owner]
        return ("(owner = %s OR lease_until < clock_timestamp() OR right(owner, char_length(%s)) = %s)",
                [self.owner, self.succeeds, self.succeeds])

    def journal(self, limit: int | None = None) -> list[JournalEntry]:
        """Entries this replica may act on: its own, those of owners whose lease expired, and
        those of the processes it succeeds."""
        condition, params = self._actionable()

        def read(conn: psycopg.Connection[Any]) -> list[JournalEntry]:
            rows = conn.execute(
                f"SELECT seq, op, tenant, item_id, created_us, owner FROM journal WHERE {condition} "
                "ORDER BY seq LIMIT %s",
                [*params, limit]).fetchall()
            return [LeasedJournalEntry(int(r[0]), r[1], r[2], r[3], int(r[4]), r[5]) for r in rows]
        return self.q.run(read, "journal read")

    def claim_journal(self, seqs: Iterable[int]) -> list[int]:
        """Take over entries before recovering them: each of ``seqs`` that is this replica's or whose
        lease expired (or whose owner this replica succeeds) becomes this replica's, leased anew, in
        one statement, so two replicas recovering at once never both act on one entry. Returns the
        seqs claimed."""
        condition, params = self._actionable()

        def claim(conn: psycopg.Connection[Any]) -> list[int]:
            rows = conn.execute(
                "UPDATE journal SET owner = %s, lease_until = clock_timestamp() + make_interval(secs => %s) "
                f"WHERE seq = ANY(%s::bigint[]) AND {condition} RETURNING seq",
                [self.owner, self.lease_s, list(seqs), *params]).fetchall()
            return sorted(int(r[0]) for r in rows)
        return self.q.run(claim, "journal claim")

    def journal_size(self) -> int:
        """Every pending entry, whoever owns it (doctor's figure)."""
        return self.q.run(lambda c: int(scalar(c.execute("SELECT count(*) FROM journal"))), "journal read")
