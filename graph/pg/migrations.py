"""The PostgreSQL schema as numbered migrations, applied at open in one transaction.

``meta.schema_version`` records the last applied step. :func:`migrate` takes an advisory lock
(replicas opening at once migrate one after the other), applies every newer step and refuses
a store whose version is newer than this code's (``GraphStoreError(kind="schema")``). DDL is
transactional in PostgreSQL: a failing step leaves the store exactly as it was.

1. The tables of ``graph/sqlite/db.py`` (memories with every column, nodes, edges, episodes, journal,
   meta) plus one id sequence for memories and episodes, journal owners and leases, and the
   counters kept in each write transaction (``tenant_state``, ``session_counts``,
   ``private_counts``) so counts are O(1).
2. Lexical search: a text search configuration ``memcore_text`` (english stemming without
   stopwords, unaccent when the server has it), the lexical window's ``prev`` column (the previous shared memory
   of the session), the generated tsvector ``tsv_win`` (own text weight A, ``prev`` weight B)
   and its GIN index (on (tenant, tsv_win) with btree_gin, else on tsv_win).
3. The ``counts`` table (type, agent, channel, channel sessions and UTC days per tenant, see
   :mod:`graph.pg.counts`), filled from the rows.
4. Versions and locks (``update_memory``, ``lock_memory``): ``supersedes_id`` (the version a row
   corrects), ``valid_to_us`` (when a newer version superseded it) and ``locked``.
5. Entities: ENTITY rows, their aliases, MENTIONS and RELATED (see :mod:`graph.pg.entities`).
7. ``tenant_state.changes``: memories written or erased (and windows rebuilt) per tenant, the clock
   that refreshes the lexical search's sampled word counts (:mod:`graph.pg.lexical_sample`).
8. ``memories_tenant_id`` on (tenant, id): the lexical sample's newest rows of one tenant.
9. Entity mention counts per viewer in ``counts`` (scope ``mention``, see :mod:`graph.pg.counts`),
   counted once from the mention rows; every write transaction keeps them from then on.
10. Facts in time: ``valid_from_us`` (when a fact became valid, if not at its timestamp),
    ``review_after_us``, and ``end_reason``/``ended_by`` (ended without a replacement).
"""

from __future__ import annotations

from collections.abc import Callable

import psycopg
from psycopg import Cursor, sql

from graph.api import GraphStoreError
from graph.pg import counts
from graph.pg.entities import SCHEMA_V5, SCHEMA_V6

MIGRATION_LOCK = 0x6D656D636F7265  # pg_advisory_xact_lock key: "memcore"

_V1 = """
CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value text NOT NULL);
CREATE SEQUENCE item_ids AS bigint;
CREATE TABLE memories (
    id bigint PRIMARY KEY,
    tenant text NOT NULL,
    session text NOT NULL,
    agent text NOT NULL,
    type text NOT NULL,
    role text,
    channel text,
    source text NOT NULL,
    source_id text,
    project_id text,
    salience double precision NOT NULL,
    visibility text NOT NULL,
    ts_us bigint NOT NULL,
    metadata text NOT NULL,
    content text NOT NULL,
    content_len integer NOT NULL,
    content_hash text NOT NULL,
    idempotency_key text
);
CREATE INDEX memories_session ON memories (tenant, session, ts_us, id);
CREATE INDEX memories_tenant_order ON memories (tenant, ts_us, id);
CREATE INDEX memories_turns ON memories (tenant, session, ts_us, id) WHERE type = 'turn';
CREATE INDEX memories_tenant_turns ON memories (tenant, ts_us, id) WHERE type = 'turn';
CREATE INDEX memories_hash ON memories (tenant, session, content_hash, ts_us);
CREATE UNIQUE INDEX memories_idem ON memories (tenant, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX memories_type ON memories (tenant, type, ts_us, id);
CREATE INDEX memories_agent ON memories (tenant, agent, ts_us, id);
CREATE INDEX memories_channel ON memories (tenant, channel, session) WHERE channel IS NOT NULL;
CREATE INDEX memories_source ON memories (tenant, source_id text_pattern_ops) WHERE source_id IS NOT NULL;
CREATE TABLE nodes (
    node_id text PRIMARY KEY,
    kind text NOT NULL,
    tenant text NOT NULL,
    attrs text NOT NULL
);
CREATE INDEX nodes_tenant ON nodes (tenant, kind);
CREATE TABLE edges (
    src text NOT NULL,
    dst text NOT NULL,
    kind text NOT NULL,
    tenant text NOT NULL,
    PRIMARY KEY (src, dst, kind)
);
CREATE INDEX edges_dst ON edges (dst);
CREATE TABLE journal (
    seq bigserial PRIMARY KEY,
    op text NOT NULL,
    tenant text NOT NULL,
    item_id text NOT NULL,
    created_us bigint NOT NULL,
    owner text NOT NULL,
    lease_until timestamptz NOT NULL
);
CREATE INDEX journal_item ON journal (item_id);
CREATE INDEX journal_owner ON journal (owner);
CREATE TABLE episodes (
    id bigint PRIMARY KEY,
    tenant text NOT NULL,
    session text NOT NULL,
    summary text NOT NULL,
    summary_source text NOT NULL,
    summary_error text,
    first_id bigint,
    last_id bigint,
    turn_count integer NOT NULL,
    last_ts_us bigint,
    handoff_id bigint,
    created_us bigint NOT NULL,
    updated_us bigint NOT NULL
);
CREATE UNIQUE INDEX episodes_session ON episodes (tenant, session);
CREATE TABLE tenant_state (
    tenant text PRIMARY KEY,
    version bigint NOT NULL DEFAULT 0,
    memories bigint NOT NULL DEFAULT 0,
    non_turn bigint NOT NULL DEFAULT 0
);
CREATE TABLE session_counts (
    tenant text NOT NULL,
    session text NOT NULL,
    memories bigint NOT NULL DEFAULT 0,
    turns bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session)
);
CREATE TABLE private_counts (
    tenant text NOT NULL,
    session text NOT NULL,
    agent text NOT NULL,
    rows bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant, session, agent)
);
-- 32 random bytes as hex, like graph/sqlite/db.py's secrets.token_hex(32) (gen_random_bytes needs pgcrypto)
INSERT INTO meta (key, value) VALUES ('cursor_secret', replace(gen_random_uuid()::text || gen_random_uuid()::text,
                                                               '-', '')) ON CONFLICT DO NOTHING;
"""

# The lexical text of a row: every run of non-alphanumerics is a separator (as FTS5's unicode61
# tokenizer splits, so "EXP-30" is "exp 30"), then english stemming (FTS5 used porter).
_V2_FUNCTIONS = """
CREATE FUNCTION memcore_tsv(body text) RETURNS tsvector LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
    SELECT to_tsvector('{config}'::regconfig, regexp_replace(body, '[^[:alnum:]]+', ' ', 'g'))
$$;
ALTER TABLE memories ADD COLUMN prev text NOT NULL DEFAULT '';
UPDATE memories m SET prev = w.prev FROM (
    SELECT id, coalesce(lag(CASE WHEN visibility = 'tenant' THEN content ELSE '' END)
           OVER (PARTITION BY tenant, session ORDER BY ts_us, id), '') AS prev FROM memories
) w WHERE m.id = w.id AND w.prev <> '';
ALTER TABLE memories ADD COLUMN tsv_win tsvector GENERATED ALWAYS AS
    (setweight(memcore_tsv(content), 'A') || setweight(memcore_tsv(prev), 'B')) STORED;
ALTER TABLE tenant_state ADD COLUMN lex_len_sum bigint NOT NULL DEFAULT 0;
INSERT INTO tenant_state AS t (tenant, lex_len_sum)
    SELECT tenant, sum(length(tsv_win)) FROM memories GROUP BY tenant
    ON CONFLICT (tenant) DO UPDATE SET lex_len_sum = excluded.lex_len_sum, version = t.version + 1;
"""


def _v1(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute(_V1)


def _v2(cur: Cursor[tuple[object, ...]]) -> None:
    # english stemming without a stopword list, as FTS5's porter tokenizer: "then 30" stays a
    # two-word phrase, and BM25's idf already gives common words almost no weight
    cur.execute("CREATE TEXT SEARCH DICTIONARY memcore_stem (TEMPLATE = snowball, Language = english)")
    cur.execute("CREATE TEXT SEARCH CONFIGURATION memcore_text (COPY = pg_catalog.english)")
    cur.execute("ALTER TEXT SEARCH CONFIGURATION memcore_text ALTER MAPPING FOR asciiword, asciihword, "
                "hword_asciipart WITH memcore_stem")
    unaccent = _try_extension(cur, "unaccent")
    cur.execute("ALTER TEXT SEARCH CONFIGURATION memcore_text ALTER MAPPING FOR word, hword, hword_part WITH "
                + ("unaccent, memcore_stem" if unaccent else "memcore_stem"))
    if unaccent:
        cur.execute("INSERT INTO meta (key, value) VALUES ('lexical_unaccent', '1') ON CONFLICT DO NOTHING")
    # the configuration is named with its schema: generated columns are recomputed under any
    # search_path (pg_restore runs with an empty one)
    schema = str(cur.execute("SELECT current_schema()").fetchone()[0])  # type: ignore[index]
    config = schema.replace('"', '""')
    cur.execute(_V2_FUNCTIONS.replace("{config}", f'"{config}".memcore_text'.replace("'", "''")))
    # with btree_gin the tenant is a key of the GIN index: a word's postings are intersected with
    # the tenant's inside the index (a rare word at 300k rows over 100 tenants: 2.4 ms, not 30 ms).
    # fastupdate off: every add goes straight into the index instead of a pending list that each
    # search scans until vacuum merges it (12 ms instead of 2.4 ms after a load; adds ~25% slower)
    create_lexical_index(cur)


LEXICAL_INDEX = "memories_lexical"


def create_lexical_index(cur: Cursor[tuple[object, ...]]) -> None:
    """The GIN index of lexical search (also doctor's repair when it is missing)."""
    if _try_extension(cur, "btree_gin"):
        cur.execute("CREATE INDEX memories_lexical ON memories USING gin (tenant, tsv_win) WITH (fastupdate = off)")
    else:
        cur.execute("CREATE INDEX memories_lexical ON memories USING gin (tsv_win) WITH (fastupdate = off)")


def _v3(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute(counts.CREATE_SQL)
    cur.execute(f"INSERT INTO counts (tenant, scope, key, n) {counts.SCOPED_SQL}")


def _v4(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS supersedes_id bigint, ADD COLUMN IF NOT EXISTS "
                "valid_to_us bigint, ADD COLUMN IF NOT EXISTS locked boolean NOT NULL DEFAULT false")
def _v5(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute(SCHEMA_V5)


def _v6(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute(SCHEMA_V6)


def _v7(cur: Cursor[tuple[object, ...]]) -> None:
    # the lexical sample's clock (graph.pg.lexical_sample): memories written or erased, windows rebuilt
    cur.execute("ALTER TABLE tenant_state ADD COLUMN IF NOT EXISTS changes bigint NOT NULL DEFAULT 0")


def _v8(cur: Cursor[tuple[object, ...]]) -> None:
    # the lexical sample's newest rows of one tenant: without it they were found by walking the primary
    # key backwards past every other tenant's newer rows (a tenant of 1 % of the table: 100 rows a row)
    cur.execute("CREATE INDEX IF NOT EXISTS memories_tenant_id ON memories (tenant, id)")


def _v9(cur: Cursor[tuple[object, ...]]) -> None:
    # recall's entity branch and the entity listing read these instead of counting mention rows (a hub
    # entity: one index entry per mention); writers wait while they are counted, so none is missed
    cur.execute("LOCK TABLE mentions IN SHARE MODE")
    cur.execute("DELETE FROM counts WHERE scope = 'mention'")
    cur.execute(f"INSERT INTO counts (tenant, scope, key, n) {counts.MENTION_SQL}")


def _v10(cur: Cursor[tuple[object, ...]]) -> None:
    cur.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS valid_from_us bigint, ADD COLUMN IF NOT EXISTS "
                "review_after_us bigint, ADD COLUMN IF NOT EXISTS end_reason text, "
                "ADD COLUMN IF NOT EXISTS ended_by text")


def _v11(cur: Cursor[tuple[object, ...]]) -> None:
    # provenance and the poisoning scan's flags (issue 50): existing rows were written by agents, unflagged
    cur.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS provenance text NOT NULL DEFAULT 'agent', "
                "ADD COLUMN IF NOT EXISTS flags text NOT NULL DEFAULT '[]'")


def _try_extension(cur: Cursor[tuple[object, ...]], name: str) -> bool:
    """CREATE EXTENSION (unaccent, btree_gin: contrib, trusted since PostgreSQL 13) when the server
    ships it and we may; without unaccent accents stay significant, without btree_gin the GIN
    index holds only the words."""
    if cur.execute("SELECT 1 FROM pg_available_extensions WHERE name = %s", [name]).fetchone() is None:
        return False
    conn = cur.connection
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the migration intact
            cur.execute(sql.SQL("CREATE EXTENSION IF NOT EXISTS {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        if exc.sqlstate is not None and (exc.sqlstate.startswith("42") or exc.sqlstate in ("0A000", "58P01")):
            return False
        raise
    return True


def _v12(cur: Cursor[tuple[object, ...]]) -> None:
    # retention (memory_core.operator.retention): when a row was archived; existing rows are not
    cur.execute("ALTER TABLE memories ADD COLUMN IF NOT EXISTS archived_us bigint")


MIGRATIONS: list[tuple[int, Callable[[Cursor[tuple[object, ...]]], None]]] = [
    (1, _v1), (2, _v2), (3, _v3), (4, _v4), (5, _v5), (6, _v6), (7, _v7), (8, _v8), (9, _v9), (10, _v10), (11, _v11),
    (12, _v12),
]
LATEST = MIGRATIONS[-1][0]


def newer_store(found: int) -> GraphStoreError:
    """The error for a store whose schema is newer than this code's: refused at open, and by each
    write transaction of a replica still running after a newer one upgraded the store."""
    return GraphStoreError("schema", f"the PostgreSQL graph store has schema version {found}, newer than "
                                     f"version {LATEST} that this memory-core knows; upgrade memory-core")


def current_version(cur: Cursor[tuple[object, ...]]) -> int:
    if cur.execute("SELECT to_regclass('meta')").fetchone() == (None,):
        return 0
    row = cur.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return 0 if row is None else int(str(row[0]))


def migrate(conn: psycopg.Connection[tuple[object, ...]], *, through: int = LATEST) -> int:
    """Bring the store to ``through`` (default: the latest) in one transaction; return the
    version it was at. A newer store is refused and left untouched."""
    with conn.transaction(), conn.cursor() as cur:
        cur.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
        found = current_version(cur)
        if found > LATEST:
            raise newer_store(found)
        for version, step in MIGRATIONS:
            if found < version <= through:
                step(cur)
                cur.execute("INSERT INTO meta (key, value) VALUES ('schema_version', %s) "
                            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(version),))
        return found
