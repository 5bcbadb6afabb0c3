"""Entities on PostgreSQL: the SQL pieces the store's entity reads
(:class:`graph.pg.store.PostgresGraphStore`) and the write transaction's entity rows
(:class:`graph.pg.txn.PgTxn`) share, over the tables of migration step 5; semantics follow SQLite's
method by method.

Two replicas naming one new entity at once: the alias row's primary key decides (the second
INSERT waits for the first to commit, finds the name taken and uses that entity; its own
fresh entity is dropped before it commits), see :func:`graph.entity_link.link`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SCHEMA_V5 = """
CREATE TABLE IF NOT EXISTS entities (
    id bigint PRIMARY KEY, tenant text NOT NULL, name text NOT NULL, kind text, created_us bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS entities_tenant ON entities (tenant, id);
CREATE TABLE IF NOT EXISTS entity_aliases (
    tenant text NOT NULL, norm text NOT NULL, entity_id bigint NOT NULL, alias text NOT NULL, pos integer NOT NULL,
    PRIMARY KEY (tenant, norm)
);
CREATE INDEX IF NOT EXISTS entity_aliases_entity ON entity_aliases (entity_id, pos);
CREATE TABLE IF NOT EXISTS mentions (
    mem_id bigint NOT NULL, entity_id bigint NOT NULL, tenant text NOT NULL, ts_us bigint NOT NULL,
    shared boolean NOT NULL, agent text NOT NULL, PRIMARY KEY (mem_id, entity_id)
);
CREATE INDEX IF NOT EXISTS mentions_entity ON mentions (entity_id, ts_us, mem_id);
CREATE TABLE IF NOT EXISTS relations (
    src bigint NOT NULL, dst bigint NOT NULL, label text NOT NULL, mem_id bigint NOT NULL, tenant text NOT NULL,
    shared boolean NOT NULL, agent text NOT NULL, PRIMARY KEY (src, dst, label, mem_id)
);
CREATE INDEX IF NOT EXISTS relations_dst ON relations (dst);
CREATE INDEX IF NOT EXISTS relations_mem ON relations (mem_id);
"""

SCHEMA_V6 = """
CREATE TABLE IF NOT EXISTS alias_seen (
    tenant text NOT NULL, norm text NOT NULL, viewer text NOT NULL, PRIMARY KEY (tenant, norm, viewer)
);
CREATE INDEX IF NOT EXISTS mentions_listing ON mentions (tenant, entity_id, shared, agent);
INSERT INTO alias_seen (tenant, norm, viewer)
    SELECT DISTINCT a.tenant, a.norm, CASE WHEN m.shared THEN '' ELSE m.agent END
    FROM entity_aliases a JOIN mentions m ON m.entity_id = a.entity_id ON CONFLICT DO NOTHING;
"""

VISIBLE = "(shared OR agent = %s)"
# how many memories the viewer (the %s) sees mention entity ``{e}``: the kept counts (schema step 9), the
# shared one and the viewer's private one, two key reads whatever the number of mentions
KEPT = ("(SELECT coalesce(sum(c.n), 0) FROM counts c WHERE c.tenant = {t} AND c.scope = 'mention' AND "
         "c.key IN ({e}::text || chr(31), {e}::text || chr(31) || %s))")
SEEN = ("EXISTS (SELECT 1 FROM alias_seen s WHERE s.tenant = a.tenant AND s.norm = a.norm "
         "AND s.viewer IN ('', %s))")


def viewer_key(viewer: str | None) -> str:
    return "\x01" if viewer is None else viewer  # no agent is named \x01 (PostgreSQL text holds no NUL)


def id_list(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(int(i) for i in ids))


KEYS_SQL = ("SELECT a.norm, a.entity_id, s.viewer FROM entity_aliases a LEFT JOIN alias_seen s ON s.tenant = a.tenant "
         "AND s.norm = a.norm WHERE a.tenant = %s AND a.norm = ANY(%s::text[])")


def held_keys(rows: Iterable[tuple[Any, ...]]) -> dict[str, tuple[int, frozenset[str]]]:
    """Each alias key found: the entity holding it and who may read it (graph.entity_link)."""
    out: dict[str, tuple[int, set[str]]] = {}
    for key, entity_id, viewer in rows:
        held = out.setdefault(str(key), (int(entity_id), set()))
        if viewer is not None:
            held[1].add(str(viewer))
    return {k: (e, frozenset(v)) for k, (e, v) in out.items()}


# what a statement that inserts or deletes mention rows returns, for the kept counts
COUNTED = " RETURNING tenant, entity_id, shared, agent"


