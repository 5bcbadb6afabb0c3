"""The SQLite graph store's schema: the version-1 tables, the numbered migration steps after
them, and the SQL that recounts every count the store keeps (doctor's check and repair).

:class:`graph.sqlite.db.GraphDB` runs :data:`MIGRATIONS` at open, in one transaction; a store whose
version is above :data:`SCHEMA_VERSION` is refused with :class:`SchemaVersionError`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    agent TEXT NOT NULL,
    type TEXT NOT NULL,
    role TEXT,
    channel TEXT,
    source TEXT NOT NULL,
    source_id TEXT,
    project_id TEXT,
    salience REAL NOT NULL,
    visibility TEXT NOT NULL,
    ts_us INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    content TEXT NOT NULL,
    content_len INTEGER NOT NULL,
    content_hash TEXT NOT NULL,
    idempotency_key TEXT
);
CREATE INDEX IF NOT EXISTS memories_session ON memories (tenant, session, ts_us, id);
CREATE INDEX IF NOT EXISTS memories_hash ON memories (tenant, session, content_hash, ts_us);
CREATE UNIQUE INDEX IF NOT EXISTS memories_idem ON memories (tenant, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE TABLE IF NOT EXISTS nodes (
    node_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    tenant TEXT NOT NULL,
    attrs TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS nodes_tenant ON nodes (tenant, kind);
CREATE TABLE IF NOT EXISTS edges (
    src TEXT NOT NULL,
    dst TEXT NOT NULL,
    kind TEXT NOT NULL,
    tenant TEXT NOT NULL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX IF NOT EXISTS edges_dst ON edges (dst);
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL,
    tenant TEXT NOT NULL,
    item_id TEXT NOT NULL,
    created_us INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    id INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    session TEXT NOT NULL,
    summary TEXT NOT NULL,
    summary_source TEXT NOT NULL,
    summary_error TEXT,
    first_id INTEGER,
    last_id INTEGER,
    turn_count INTEGER NOT NULL,
    last_ts_us INTEGER,
    handoff_id INTEGER,
    created_us INTEGER NOT NULL,
    updated_us INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS episodes_session ON episodes (tenant, session);
CREATE TABLE IF NOT EXISTS fts_tables (tenant TEXT PRIMARY KEY, name TEXT NOT NULL);
"""

# Version 2: reads are served by indexes, and the counts reads need are kept in the write
# transaction (see graph.sqlite.txn), so an open reads no memory rows.
_SCHEMA_V2 = """
CREATE TABLE IF NOT EXISTS counts (
    tenant TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY (tenant, scope, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS memories_time ON memories (tenant, ts_us, id);
CREATE INDEX IF NOT EXISTS memories_turns ON memories (tenant, session, ts_us, id) WHERE type = 'turn';
CREATE INDEX IF NOT EXISTS memories_type ON memories (tenant, type, ts_us, id);
CREATE INDEX IF NOT EXISTS memories_agent ON memories (tenant, agent, ts_us, id);
CREATE INDEX IF NOT EXISTS memories_channel ON memories (tenant, channel, ts_us, id) WHERE channel IS NOT NULL;
CREATE INDEX IF NOT EXISTS memories_source ON memories (tenant, source_id) WHERE source_id IS NOT NULL;
"""

# Every count of memory rows a read needs, by (scope, key); graph.sqlite.txn keeps them on write and erase.
# 'schan' keys are channel \x1f session (shared rows only): the sessions of a channel are a range.
MEMORY_COUNT_SCOPES_SQL = """
SELECT tenant, 'all', '', count(*) FROM memories GROUP BY tenant
UNION ALL SELECT tenant, 'nonturn', '', count(*) FROM memories WHERE type != 'turn' GROUP BY tenant
UNION ALL SELECT tenant, 'session', session, count(*) FROM memories GROUP BY tenant, session
UNION ALL SELECT tenant, 'turns', session, count(*) FROM memories WHERE type = 'turn' GROUP BY tenant, session
UNION ALL SELECT tenant, 'private', session || char(31) || agent, count(*) FROM memories
    WHERE visibility = 'agent' GROUP BY tenant, session, agent
UNION ALL SELECT tenant, 'type', type, count(*) FROM memories GROUP BY tenant, type
UNION ALL SELECT tenant, 'agent', agent, count(*) FROM memories GROUP BY tenant, agent
UNION ALL SELECT tenant, 'channel', channel, count(*) FROM memories WHERE channel IS NOT NULL GROUP BY tenant, channel
UNION ALL SELECT tenant, 'schan', channel || char(31) || session, count(*) FROM memories
    WHERE channel IS NOT NULL AND visibility = 'tenant' GROUP BY tenant, channel, session
UNION ALL SELECT tenant, 'day', printf('%08d', ts_us / 86400000000), count(*) FROM memories
    GROUP BY tenant, ts_us / 86400000000
"""


def _count_scopes_sql() -> str:
    from graph.sqlite.entities import MENTION_COUNTS_SQL

    return MEMORY_COUNT_SCOPES_SQL.rstrip() + "\nUNION ALL " + MENTION_COUNTS_SQL


# ... and every count the store keeps (doctor's recount): the memory scopes and the entity mentions (step 7)
COUNT_SCOPES_SQL = _count_scopes_sql()


def run_script(cur: sqlite3.Cursor, script: str) -> None:
    for statement in script.split(";"):
        if statement.strip():
            cur.execute(statement)


def _v2(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Counts and read indexes; an upgrade from 1 counts the rows and scopes legacy private keys."""
    run_script(cur, _SCHEMA_V2)
    if not fresh:
        cur.execute("DELETE FROM counts")  # the mention counts come with step 7 (no mentions before step 4)
        cur.execute(f"INSERT INTO counts (tenant, scope, key, n) {MEMORY_COUNT_SCOPES_SQL}")
        cur.execute(
            "UPDATE memories SET idempotency_key = agent || char(31) || idempotency_key WHERE "
            "visibility = 'agent' AND idempotency_key IS NOT NULL AND instr(idempotency_key, char(31)) = 0"
        )


def _v3(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Versions and locks (update_memory, lock_memory): the version a row corrects, the end of a
    superseded row's validity, the lock. Existing rows are current, unlocked first versions."""
    present = {str(r[1]) for r in cur.execute("PRAGMA table_info(memories)")}  # a re-run step adds nothing twice
    for column, decl in (("supersedes_id", "INTEGER"), ("valid_to_us", "INTEGER"),
                         ("locked", "INTEGER NOT NULL DEFAULT 0")):
        if column not in present:
            cur.execute(f"ALTER TABLE memories ADD COLUMN {column} {decl}")
def _v4(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Entities: ENTITY rows, their aliases, MENTIONS and RELATED (see graph.sqlite.entities)."""
    from graph.sqlite.entities import SCHEMA_V4

    run_script(cur, SCHEMA_V4)


def _v6(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Alias views: which viewers may read each entity name (see graph.sqlite.entities)."""
    from graph.sqlite.entities import SCHEMA_V6

    run_script(cur, SCHEMA_V6)


def _v7(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Entity mention counts per viewer, kept by triggers on the mention rows (see graph.sqlite.entities)."""
    from graph.sqlite.entities import MENTION_COUNTS_SQL, MENTION_TRIGGERS

    for trigger in MENTION_TRIGGERS:  # not run_script: a trigger's body holds semicolons
        cur.execute(trigger)
    if not fresh:  # one pass over the mention rows, once
        cur.execute("DELETE FROM counts WHERE scope = 'mention'")
        cur.execute(f"INSERT INTO counts (tenant, scope, key, n) {MENTION_COUNTS_SQL}")


def _v8(cur: sqlite3.Cursor, fresh: bool) -> None:
    """The SUPERSEDES edges (handoff chains, corrections) apart from the two edges every memory has:
    recall asks it of each of its ~200 candidates, and most tenants hold none (see SqliteEdges.superseders)."""
    cur.execute("CREATE INDEX IF NOT EXISTS edges_supersedes ON edges (tenant, dst) WHERE kind = 'SUPERSEDES'")


def _v9(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Facts in time (memory_core.versions): when a fact became valid if not at its timestamp, when it should
    be reviewed, and why and by whom it was ended without a replacement. Existing rows: valid from their
    timestamp, no review, not ended (a superseded row keeps its valid_to_us)."""
    present = {str(r[1]) for r in cur.execute("PRAGMA table_info(memories)")}
    for column, decl in (("valid_from_us", "INTEGER"), ("review_after_us", "INTEGER"), ("end_reason", "TEXT"),
                         ("ended_by", "TEXT")):
        if column not in present:
            cur.execute(f"ALTER TABLE memories ADD COLUMN {column} {decl}")


def _v10(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Provenance and the poisoning scan's flags (issue 50): existing rows were written by agents, unflagged."""
    present = {str(r[1]) for r in cur.execute("PRAGMA table_info(memories)")}  # a re-run step adds nothing twice
    for column, decl in (("provenance", "TEXT NOT NULL DEFAULT 'agent'"), ("flags", "TEXT NOT NULL DEFAULT '[]'")):
        if column not in present:
            cur.execute(f"ALTER TABLE memories ADD COLUMN {column} {decl}")


def _v11(cur: sqlite3.Cursor, fresh: bool) -> None:
    """Retention (memory_core.operator.retention): when a row was archived (out of recall and the vector
    index, kept in the graph, restorable). Existing rows are not archived."""
    present = {str(r[1]) for r in cur.execute("PRAGMA table_info(memories)")}
    if "archived_us" not in present:
        cur.execute("ALTER TABLE memories ADD COLUMN archived_us INTEGER")


# Numbered steps after the version-1 schema (SCHEMA_V1); a fresh store runs every step with
# fresh=True. Append a step (and nothing else) to change the schema.
MIGRATIONS: list[tuple[int, Callable[[sqlite3.Cursor, bool], None]]] = [
    (2, _v2), (3, _v3), (4, _v4), (6, _v6), (7, _v7), (8, _v8), (9, _v9), (10, _v10), (11, _v11)]
SCHEMA_VERSION = MIGRATIONS[-1][0]
