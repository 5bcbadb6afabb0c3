"""Entities on SQLite: the schema of step 4 and the SQL pieces the store's entity reads
(:class:`graph.sqlite.store.SqliteGraphStore`) and the write transaction's entity rows
(:class:`graph.sqlite.txn.SqliteTxn`) share.

``mentions`` and ``relations`` rows copy the writing memory's visibility (``shared``, ``agent``)
and timestamp, so a viewer-filtered read never joins the memories table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

ENTITY_CHUNK = 400
VISIBLE = "(shared = 1 OR agent = ?)"

SCHEMA_V4 = """
CREATE TABLE IF NOT EXISTS entities (
    id INTEGER PRIMARY KEY, tenant TEXT NOT NULL, name TEXT NOT NULL, kind TEXT, created_us INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS entities_tenant ON entities (tenant, id);
CREATE TABLE IF NOT EXISTS entity_aliases (
    tenant TEXT NOT NULL, norm TEXT NOT NULL, entity_id INTEGER NOT NULL, alias TEXT NOT NULL, pos INTEGER NOT NULL,
    PRIMARY KEY (tenant, norm)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entity_aliases_entity ON entity_aliases (entity_id, pos);
CREATE TABLE IF NOT EXISTS mentions (
    mem_id INTEGER NOT NULL, entity_id INTEGER NOT NULL, tenant TEXT NOT NULL, ts_us INTEGER NOT NULL,
    shared INTEGER NOT NULL, agent TEXT NOT NULL, PRIMARY KEY (mem_id, entity_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_entity ON mentions (entity_id, ts_us, mem_id);
CREATE TABLE IF NOT EXISTS relations (
    src INTEGER NOT NULL, dst INTEGER NOT NULL, label TEXT NOT NULL, mem_id INTEGER NOT NULL, tenant TEXT NOT NULL,
    shared INTEGER NOT NULL, agent TEXT NOT NULL, PRIMARY KEY (src, dst, label, mem_id)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS relations_dst ON relations (dst);
CREATE INDEX IF NOT EXISTS relations_mem ON relations (mem_id)
"""


SCHEMA_V6 = """
CREATE TABLE IF NOT EXISTS alias_seen (
    tenant TEXT NOT NULL, norm TEXT NOT NULL, viewer TEXT NOT NULL, PRIMARY KEY (tenant, norm, viewer)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mentions_listing ON mentions (tenant, entity_id, shared, agent);
INSERT OR IGNORE INTO alias_seen (tenant, norm, viewer)
    SELECT DISTINCT a.tenant, a.norm, CASE WHEN m.shared THEN '' ELSE m.agent END
    FROM entity_aliases a JOIN mentions m ON m.entity_id = a.entity_id
"""
# Step 7: how many memories each viewer sees mention an entity, kept in ``counts`` (scope 'mention',
# key entity id \x1f '' for shared mentions or \x1f the author for private ones) by the mention rows'
# own triggers, so no write path can miss one (merges move mentions with INSERT ... SELECT). Recall's
# entity branch asks it for every entity of the query and of its best rows: counted from the index,
# a hub entity cost one step per mention (at 1M memories ~40 ms of page reads a recall).
MENTION_COUNT_KEY = "{m}.entity_id || char(31) || CASE WHEN {m}.shared THEN '' ELSE {m}.agent END"
MENTION_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS mentions_counted AFTER INSERT ON mentions BEGIN "
    "INSERT INTO counts (tenant, scope, key, n) VALUES (NEW.tenant, 'mention', "
    f"{MENTION_COUNT_KEY.format(m='NEW')}, 1) ON CONFLICT (tenant, scope, key) DO UPDATE SET n = n + 1; END",
    "CREATE TRIGGER IF NOT EXISTS mentions_uncounted AFTER DELETE ON mentions BEGIN "
    "UPDATE counts SET n = n - 1 WHERE tenant = OLD.tenant AND scope = 'mention' AND "
    f"key = {MENTION_COUNT_KEY.format(m='OLD')}; "
    "DELETE FROM counts WHERE tenant = OLD.tenant AND scope = 'mention' AND "
    f"key = {MENTION_COUNT_KEY.format(m='OLD')} AND n <= 0; END",
)
MENTION_COUNTS_SQL = (f"SELECT tenant, 'mention', {MENTION_COUNT_KEY.format(m='m')}, count(*) FROM mentions m "
                      f"GROUP BY tenant, {MENTION_COUNT_KEY.format(m='m')}")

# Which names a viewer may read: one row per (alias key, '' or the private author) that declared it
# (graph.entity_link: a private key's one row names its agent).
# A store from before step 6 gets the old rule for its aliases (seen by whoever sees a mention).
SEEN = "EXISTS (SELECT 1 FROM alias_seen s WHERE s.tenant = a.tenant AND s.norm = a.norm AND s.viewer IN ('', ?))"


def qmarks(n: int) -> str:
    return ",".join("?" * n)


def chunks(ids: Iterable[int]) -> Iterable[list[int]]:
    wanted = list(dict.fromkeys(int(i) for i in ids))
    for start in range(0, len(wanted), ENTITY_CHUNK):
        yield wanted[start:start + ENTITY_CHUNK]


def viewer_key(viewer: str | None) -> str:
    return "\x00" if viewer is None else viewer  # no agent is named NUL: None sees shared rows only


def lookup_keys_with(run: Callable[[str, Sequence[Any]], list[Any]], tenant: str,
                 keys: Sequence[str]) -> dict[str, tuple[int, frozenset[str]]]:
    """Each alias key found: the entity holding it and who may read it (graph.entity_link)."""
    out: dict[str, tuple[int, set[str]]] = {}
    for start in range(0, len(keys), ENTITY_CHUNK):
        chunk = list(keys[start:start + ENTITY_CHUNK])
        for key, entity_id, viewer in run("SELECT a.norm, a.entity_id, s.viewer FROM entity_aliases a LEFT JOIN "
                                          "alias_seen s ON s.tenant = a.tenant AND s.norm = a.norm WHERE a.tenant = ? "
                                          f"AND a.norm IN ({qmarks(len(chunk))})", [tenant, *chunk]):
            held = out.setdefault(str(key), (int(entity_id), set()))
            if viewer is not None:
                held[1].add(str(viewer))
    return {k: (e, frozenset(v)) for k, (e, v) in out.items()}


