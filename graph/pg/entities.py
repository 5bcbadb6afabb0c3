"""Entities on PostgreSQL: the store's reads (:class:`PgEntityReads`) and the write transaction's
rows (:class:`PgEntityWrites`), over the tables of migration step 5; semantics follow
:mod:`graph.sqlite.entities` method by method.

Two replicas naming one new entity at once: the alias row's primary key decides (the second
INSERT waits for the first to commit, finds the name taken and uses that entity; its own
fresh entity is dropped before it commits), see :func:`graph.entity_link.link`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg import sql

from graph.api import EntityNode, EntityRecord, EntityRelation, EntitySpec, RelationSpec, entity_node, entity_norm
from graph.entity_link import Writer, link, seen_by
from graph.entity_values import display_names
from graph.pg.counts import mention_key

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

_VISIBLE = "(shared OR agent = %s)"
# how many memories the viewer (the %s) sees mention entity ``{e}``: the kept counts (schema step 9), the
# shared one and the viewer's private one, two key reads whatever the number of mentions
_KEPT = ("(SELECT coalesce(sum(c.n), 0) FROM counts c WHERE c.tenant = {t} AND c.scope = 'mention' AND "
         "c.key IN ({e}::text || chr(31), {e}::text || chr(31) || %s))")
_SEEN = ("EXISTS (SELECT 1 FROM alias_seen s WHERE s.tenant = a.tenant AND s.norm = a.norm "
         "AND s.viewer IN ('', %s))")


def _viewer(viewer: str | None) -> str:
    return "\x01" if viewer is None else viewer  # no agent is named \x01 (PostgreSQL text holds no NUL)


def _ids(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(int(i) for i in ids))


class PgEntityReads:
    """Entity reads (``_q`` comes from :class:`graph.pg.reads.Reads`)."""

    def _q(self, query: str | sql.Composable, args: list[Any], what: str = "read") -> list[tuple[Any, ...]]:
        raise NotImplementedError

    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {_SEEN}", [_viewer(viewer)])
        for entity_id, alias in self._q(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id = "
                                        f"ANY(%s::bigint[]){seen} ORDER BY a.entity_id, a.pos", [list(ids), *extra]):
            out.setdefault(int(entity_id), []).append(str(alias))
        return {k: tuple(v) for k, v in out.items()}

    def _nodes(self, tenant: str, rows: list[tuple[Any, ...]], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        rows = self._q(f"SELECT e.id, e.name, e.kind, e.created_us, {_KEPT.format(t='e.tenant', e='e.id')} "
                       f"FROM entities e WHERE e.id = %s AND e.tenant = %s", [_viewer(viewer), entity_id, tenant])
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for r in self._q(
            f"SELECT e.id FROM entities e WHERE e.tenant = %s AND e.id = ANY(%s::bigint[]) AND "
            f"{_KEPT.format(t='e.tenant', e='e.id')} > 0", [tenant, _ids(entity_ids), _viewer(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        found = self._q(f"SELECT a.entity_id FROM entity_aliases a WHERE a.tenant = %s AND a.norm = %s AND {_SEEN}",
                        [tenant, entity_norm(name), _viewer(viewer)])
        return self.entity(tenant, int(found[0][0]), viewer) if found else None

    def entity_ids(self, tenant: str, names: Sequence[str]) -> dict[str, int]:
        by_norm: dict[str, list[str]] = {}
        for name in names:
            by_norm.setdefault(entity_norm(name), []).append(name)
        out: dict[str, int] = {}
        if by_norm:
            for norm, entity_id in self._q("SELECT norm, entity_id FROM entity_aliases WHERE tenant = %s AND "
                                           "norm = ANY(%s)", [tenant, list(by_norm)]):
                out.update((name, int(entity_id)) for name in by_norm[str(norm)])
        return out

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts: one row per entity and viewer, none per mention
        rows = self._q("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT split_part(key, chr(31), 1)"
                       "::bigint AS entity_id, sum(n) AS n FROM counts WHERE tenant = %s AND scope = 'mention' AND "
                       "split_part(key, chr(31), 2) IN ('', %s) GROUP BY 1) c JOIN entities e ON e.id = c.entity_id "
                       "AND e.tenant = %s AND (%s::text IS NULL OR e.kind = %s) WHERE c.n > 0 "
                       "ORDER BY c.n DESC, e.name COLLATE \"C\", e.id LIMIT %s",
                       [tenant, _viewer(viewer), tenant, kind, kind, limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        rows = self._q(f"SELECT w.e, x.mem_id FROM unnest(%s::bigint[]) w(e), LATERAL (SELECT mem_id FROM mentions "
                       f"WHERE entity_id = w.e AND tenant = %s AND {_VISIBLE} ORDER BY ts_us DESC, mem_id DESC "
                       f"LIMIT %s) x", [_ids(entity_ids), tenant, _viewer(viewer), limit])
        out: dict[int, list[int]] = {}
        for entity_id, mem_id in rows:
            out.setdefault(int(entity_id), []).append(int(mem_id))
        return out

    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        rows = self._q(f"SELECT w.e, {_KEPT.format(t='%s', e='w.e')} FROM unnest(%s::bigint[]) w(e)",
                       [tenant, _viewer(viewer), _ids(entity_ids)])
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for mem_id, entity_id in self._q("SELECT mem_id, entity_id FROM mentions WHERE mem_id = ANY(%s::bigint[]) "
                                         "AND tenant = %s ORDER BY mem_id, entity_id", [_ids(mem_ids), tenant]):
            out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        wanted = _ids(entity_ids)
        rows = self._q(f"SELECT src, dst, label, mem_id FROM relations WHERE (src = ANY(%s::bigint[]) OR "
                       f"dst = ANY(%s::bigint[])) AND tenant = %s AND {_VISIBLE} "
                       f"ORDER BY src, dst, label COLLATE \"C\", mem_id", [wanted, wanted, tenant, _viewer(viewer)])
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in rows]

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        rows = self._q("SELECT id, name, kind, created_us FROM entities WHERE tenant = %s AND (%s::bigint[] IS NULL "
                       "OR id = ANY(%s::bigint[])) ORDER BY id", [tenant, *([None if ids is None else _ids(ids)] * 2)])
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for norm, viewer in self._q("SELECT norm, viewer FROM alias_seen WHERE tenant = %s", [tenant]):
            out.setdefault(str(norm), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self._q(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = %s ORDER BY mem_id, entity_id", [tenant])]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self._q(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = %s "
            "ORDER BY src, dst, label COLLATE \"C\", mem_id", [tenant])]


# what a statement that inserts or deletes mention rows returns, for the kept counts
_COUNTED = " RETURNING tenant, entity_id, shared, agent"


class PgEntityWrites:
    """The entity rows of one write transaction (``_x``, ``allocate_ids``, ``touch`` and the count
    deltas ``_scoped`` come from PgTxn).

    Every statement that inserts or deletes mention rows returns them, and each one moves its
    viewer's ``mention`` count (:func:`graph.pg.counts.mention_key`) among the transaction's count
    deltas, applied at commit in key order with the others (no lock-order deadlock, nothing
    counted for a transaction that rolls back). Doctor recounts them from the rows."""

    _scoped: Counter[tuple[str, str, str]]

    def _counted(self, rows: Iterable[tuple[Any, ...]], sign: int) -> int:
        """Moves the mention counts of the rows a statement inserted (+1) or deleted (-1); how many."""
        n = 0
        for tenant, entity_id, shared, agent in rows:
            self._scoped[(str(tenant), "mention", mention_key(int(entity_id), bool(shared), str(agent)))] += sign
            n += 1
        return n

    def _x(self, query: str | sql.Composable, args: Iterable[Any] = ()) -> Any:
        raise NotImplementedError

    def allocate_ids(self, n: int) -> list[int]:
        raise NotImplementedError

    def touch(self, tenant: str) -> None:
        raise NotImplementedError

    # ---- graph.entity_link.EntityRows ----------------------------------------------------------
    def lookup_norms(self, tenant: str, norms: Sequence[str]) -> dict[str, int]:
        rows = self._x("SELECT norm, entity_id FROM entity_aliases WHERE tenant = %s AND norm = ANY(%s::text[])",
                       [tenant, list(norms)]).fetchall()
        return {str(n): int(e) for n, e in rows}

    def create_entity(self, tenant: str, name: str, kind: str | None, now_us: int) -> int:
        entity_id = self.allocate_ids(1)[0]
        self._x("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (%s, %s, %s, %s, %s)",
                [entity_id, tenant, name, kind, now_us])
        return entity_id

    def add_alias(self, tenant: str, entity_id: int, norm: str, alias: str) -> int:
        found = self._x("INSERT INTO entity_aliases (tenant, norm, entity_id, alias, pos) VALUES (%s, %s, %s, %s, "
                        "(SELECT coalesce(max(pos), -1) + 1 FROM entity_aliases WHERE entity_id = %s)) "
                        "ON CONFLICT DO NOTHING RETURNING entity_id",
                        [tenant, norm, entity_id, alias, entity_id]).fetchone()
        if found is None:
            found = self._x("SELECT entity_id FROM entity_aliases WHERE tenant = %s AND norm = %s",
                            [tenant, norm]).fetchone()
        return int(found[0])

    def drop_entity(self, tenant: str, entity_id: int) -> None:
        self._x("DELETE FROM entities WHERE id = %s AND tenant = %s", [entity_id, tenant])

    def fill_kind(self, tenant: str, entity_id: int, kind: str) -> None:
        self._x("UPDATE entities SET kind = %s WHERE id = %s AND tenant = %s AND kind IS NULL",
                [kind, entity_id, tenant])

    def see_aliases(self, tenant: str, viewer: str, norms: Sequence[str]) -> None:
        self._x("INSERT INTO alias_seen (tenant, norm, viewer) SELECT %s, n, %s FROM unnest(%s::text[]) n "
                "ON CONFLICT DO NOTHING", [tenant, viewer, list(norms)])

    def write_mentions(self, tenant: str, writer: Writer, entity_ids: Sequence[int]) -> None:
        self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT %s, e, %s, %s, %s, %s "
            f"FROM unnest(%s::bigint[]) e ON CONFLICT DO NOTHING{_COUNTED}",
            [writer.mem_id, tenant, writer.ts_us, writer.shared, writer.agent, list(entity_ids)]).fetchall(), 1)

    def write_relations(self, tenant: str, writer: Writer, rows: Sequence[tuple[int, int, str]]) -> None:
        if rows:
            self._x("INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) SELECT s, d, lb, %s, %s, "
                    "%s, %s FROM unnest(%s::bigint[], %s::bigint[], %s::text[]) r(s, d, lb) ON CONFLICT DO NOTHING",
                    [writer.mem_id, tenant, writer.shared, writer.agent, [r[0] for r in rows], [r[1] for r in rows],
                     [r[2] for r in rows]])

    # ---- graph.api.GraphTxn ------------------------------------------------------------------
    def _writer(self, tenant: str, mem_id: int) -> Writer | None:
        found = self._x("SELECT ts_us, visibility, agent FROM memories WHERE id = %s AND tenant = %s",
                        [mem_id, tenant]).fetchone()
        return None if found is None else Writer(mem_id, int(found[0]), found[1] == "tenant", str(found[2]))

    def link_entities(self, tenant: str, mem_id: int, entities: Sequence[EntitySpec],
                      relations: Sequence[RelationSpec], now_us: int) -> list[int]:
        writer = self._writer(tenant, mem_id)
        if writer is None or not (entities or relations):
            return []
        self.touch(tenant)
        return link(self, tenant, writer, entities, relations, now_us)

    def _owned(self, tenant: str, ids: Sequence[int]) -> bool:
        row = self._x("SELECT count(*) FROM entities WHERE tenant = %s AND id = ANY(%s::bigint[])",
                      [tenant, list(ids)]).fetchone()
        return int(row[0]) == len(set(ids))

    def merge_entities(self, tenant: str, keep: int, merge: int) -> bool:
        if keep == merge:
            return False
        # both rows locked in id order: two merges of the same pair cannot interleave
        locked = self._x("SELECT id FROM entities WHERE tenant = %s AND id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE",
                         [tenant, [keep, merge]]).fetchall()
        if len(locked) != 2:
            return False
        self._x("UPDATE entity_aliases SET entity_id = %s, pos = pos + 1 + (SELECT coalesce(max(pos), -1) FROM "
                "entity_aliases WHERE entity_id = %s) WHERE entity_id = %s", [keep, keep, merge])
        self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT mem_id, %s, tenant, "
            f"ts_us, shared, agent FROM mentions WHERE entity_id = %s ON CONFLICT DO NOTHING{_COUNTED}",
            [keep, merge]).fetchall(), 1)
        self._counted(self._x(f"DELETE FROM mentions WHERE entity_id = %s{_COUNTED}", [merge]).fetchall(), -1)
        self._x("INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) SELECT CASE src WHEN %s THEN "
                "%s ELSE src END, CASE dst WHEN %s THEN %s ELSE dst END, label, mem_id, tenant, shared, agent FROM "
                "relations WHERE (src = %s OR dst = %s) AND tenant = %s ON CONFLICT DO NOTHING",
                [merge, keep, merge, keep, merge, merge, tenant])
        self._x("DELETE FROM relations WHERE (src = %s OR dst = %s OR (src = %s AND dst = %s)) AND tenant = %s",
                [merge, merge, keep, keep, tenant])
        self._x("UPDATE entities SET kind = (SELECT kind FROM entities WHERE id = %s) WHERE id = %s AND kind IS NULL",
                [merge, keep])
        self._x("DELETE FROM entities WHERE id = %s", [merge])
        self.touch(tenant)
        return True

    def restore_entity(self, tenant: str, record: EntityRecord) -> bool:
        created = self._x("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (%s, %s, %s, %s, %s) "
                          "ON CONFLICT DO NOTHING RETURNING id",
                          [record.id, tenant, record.name, record.kind, record.created_us]).fetchone()
        if created is None:
            owner = self._x("SELECT tenant FROM entities WHERE id = %s", [record.id]).fetchone()
            if owner is None or owner[0] != tenant:
                return False
            if record.kind:
                self.fill_kind(tenant, record.id, record.kind)
        for alias in (record.name, *record.aliases):
            self.add_alias(tenant, record.id, entity_norm(alias), alias)
        self.touch(tenant)
        return created is not None

    def restore_mentions(self, tenant: str, mem_id: int, entity_ids: Sequence[int]) -> int:
        writer = self._writer(tenant, mem_id)
        wanted = _ids(entity_ids)
        if writer is None or not wanted:
            return 0
        written = self._counted(self._x(
            "INSERT INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) SELECT %s, id, tenant, "
            f"%s, %s, %s FROM entities WHERE id = ANY(%s::bigint[]) AND tenant = %s ON CONFLICT DO NOTHING{_COUNTED}",
            [mem_id, writer.ts_us, writer.shared, writer.agent, wanted, tenant]).fetchall(), 1)
        if written:
            self.touch(tenant)
        return written

    def restore_alias_views(self, tenant: str, mem_id: int, names: Sequence[str]) -> None:
        writer = self._writer(tenant, mem_id)
        if writer is not None and names:
            self.see_aliases(tenant, seen_by(writer), list(dict.fromkeys(entity_norm(n) for n in names)))

    def restore_relations(self, tenant: str, relations: Sequence[EntityRelation]) -> int:
        written = 0
        for rel in relations:
            writer = self._writer(tenant, rel.mem_id)
            if writer is None or rel.src == rel.dst or not self._owned(tenant, [rel.src, rel.dst]):
                continue
            written += len(self._x(
                "INSERT INTO relations (src, dst, label, mem_id, tenant, shared, agent) VALUES (%s, %s, %s, %s, %s, "
                "%s, %s) ON CONFLICT DO NOTHING RETURNING 1",
                [rel.src, rel.dst, rel.label, rel.mem_id, tenant, writer.shared, writer.agent]).fetchall())
        if written:
            self.touch(tenant)
        return written

    def erase_entity_links(self, tenant: str, mentions: Sequence[tuple[int, int]],
                           relations: Sequence[EntityRelation]) -> int:
        gone = 0
        for mem_id, entity_id in mentions:
            gone += self._counted(self._x(f"DELETE FROM mentions WHERE mem_id = %s AND entity_id = %s AND tenant = %s"
                                          f"{_COUNTED}", [mem_id, entity_id, tenant]).fetchall(), -1)
        for r in relations:
            gone += len(self._x("DELETE FROM relations WHERE src = %s AND dst = %s AND label = %s AND mem_id = %s "
                                "AND tenant = %s RETURNING 1", [r.src, r.dst, r.label, r.mem_id, tenant]).fetchall())
        self.touch(tenant)
        return gone

    def erase_entity_rows(self, mem_id: int) -> None:
        """A deleted memory's MENTIONS and the RELATED edges it declared (its entities stay)."""
        self._counted(self._x(f"DELETE FROM mentions WHERE mem_id = %s{_COUNTED}", [mem_id]).fetchall(), -1)
        self._x("DELETE FROM relations WHERE mem_id = %s", [mem_id])
