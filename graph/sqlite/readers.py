"""Read-only SQLite connections beside the writer's, for the long reads recall runs in parallel.

The store's own connection is shared by every thread under one lock, so a 10 ms FTS5 search in
recall's lexical worker held up the entity reads and the vector branch's graph reads that were
meant to run beside it. In WAL mode readers never wait on the writer or on each other: each
:meth:`ReaderPool.snapshot` is a read transaction on a pooled connection of its own, one
consistent view of the last commit, taken without the writer's lock.

What a snapshot does not see: an uncommitted transaction of the writer (which also means a
table it is creating). Whoever reads through one must not put what it read into a cache that
the writer's commits maintain (a stale row would outlive the commit that changed it); the
lexical branch's hits are ids that recall re-checks on the store's own connection.
"""

from __future__ import annotations

import queue
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

IDLE_KEPT = 4  # idle connections kept open; more concurrent readers open (and then close) their own


class ReaderPool:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._generation = 0  # moved by reset() and close(): older connections are not reused
        self._closed = False

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None, timeout=30.0)
        try:
            conn.execute("PRAGMA query_only=1")
        except BaseException:
            conn.close()
            raise
        return conn

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A connection inside a read transaction (BEGIN … COMMIT): every statement sees one commit."""
        with self._lock:
            if self._closed:
                raise sqlite3.ProgrammingError("the store is closed")
            generation = self._generation
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self._connect()
        try:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute("COMMIT")  # a read transaction: nothing to write
        except BaseException:
            conn.close()  # an error may leave it in any state: never reused
            raise
        self._give_back(conn, generation)

    def _give_back(self, conn: sqlite3.Connection, generation: int) -> None:
        with self._lock:
            keep = not self._closed and generation == self._generation and self._idle.qsize() < IDLE_KEPT
            if keep:
                self._idle.put(conn)
        if not keep:
            conn.close()

    def reset(self) -> None:
        """Close the idle connections (the file may have been replaced underneath: a restore)."""
        with self._lock:
            self._generation += 1
            self._drain()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._generation += 1
            self._drain()

    def _drain(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
