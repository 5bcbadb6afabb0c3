"""Entities on SQLite: the store's reads (:class:`SqliteEntityReads`) and the write
transaction's rows (:class:`SqliteEntityWrites`), over the tables of schema step 4.

``mentions`` and ``relations`` rows copy the writing memory's visibility (``shared``, ``agent``)
and timestamp, so a viewer-filtered read never joins the memories table.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from contextlib import AbstractContextManager
from typing import Any

from graph.api import EntityNode, EntityRecord, EntityRelation, EntitySpec, RelationSpec, entity_node, entity_norm
from graph.entity_link import Writer, link, seen_by
from graph.entity_values import display_names

_CHUNK = 400
_VISIBLE = "(shared = 1 OR agent = ?)"

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

# Which names a viewer may read: one row per (alias, '' or the private author) that declared it.
# A store from before step 6 gets the old rule for its aliases (seen by whoever sees a mention).
_SEEN = "EXISTS (SELECT 1 FROM alias_seen s WHERE s.tenant = a.tenant AND s.norm = a.norm AND s.viewer IN ('', ?))"


def _marks(n: int) -> str:
    return ",".join("?" * n)


def _chunks(ids: Iterable[int]) -> Iterable[list[int]]:
    wanted = list(dict.fromkeys(int(i) for i in ids))
    for start in range(0, len(wanted), _CHUNK):
        yield wanted[start:start + _CHUNK]


def _viewer(viewer: str | None) -> str:
    return "\x00" if viewer is None else viewer  # no agent is named NUL: None sees shared rows only


class SqliteEntityReads:
    """Entity reads over the store's connection (``_read``/``_all``/``_one`` come from the store)."""

    def _read(self) -> AbstractContextManager[sqlite3.Connection]:
        raise NotImplementedError

    def _all(self, sql: str, args: Sequence[Any]) -> list[Any]:
        raise NotImplementedError

    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        """Each entity's aliases in order: all of them (``everyone``) or those the viewer may read."""
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {_SEEN}", [_viewer(viewer)])
        for chunk in _chunks(ids):
            for entity_id, alias in self._all(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id "
                                              f"IN ({_marks(len(chunk))}){seen} ORDER BY a.entity_id, a.pos",
                                              [*chunk, *extra]):
                out.setdefault(int(entity_id), []).append(str(alias))
        return {k: tuple(v) for k, v in out.items()}

    def _nodes(self, tenant: str, rows: list[Any], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        # the kept counts (step 7): two key reads, whatever the number of mentions
        rows = self._all("SELECT e.id, e.name, e.kind, e.created_us, (SELECT coalesce(sum(c.n), 0) FROM counts c "
                         "WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN (e.id || char(31), "
                         "e.id || char(31) || ?)) FROM entities e WHERE e.id = ? AND e.tenant = ?",
                         (_viewer(viewer), entity_id, tenant))
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for chunk in _chunks(entity_ids) for r in self._all(
            f"SELECT e.id FROM entities e WHERE e.tenant = ? AND e.id IN ({_marks(len(chunk))}) AND (SELECT "
            "coalesce(sum(c.n), 0) FROM counts c WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN "
            "(e.id || char(31), e.id || char(31) || ?)) > 0", [tenant, *chunk, _viewer(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        found = self._all(f"SELECT a.entity_id FROM entity_aliases a WHERE a.tenant = ? AND a.norm = ? AND {_SEEN}",
                          (tenant, entity_norm(name), _viewer(viewer)))
        return self.entity(tenant, int(found[0][0]), viewer) if found else None

    def entity_ids(self, tenant: str, names: Sequence[str]) -> dict[str, int]:
        by_norm: dict[str, list[str]] = {}
        for name in names:
            by_norm.setdefault(entity_norm(name), []).append(name)
        norms = list(by_norm)
        out: dict[str, int] = {}
        for start in range(0, len(norms), 500):
            chunk = norms[start:start + 500]
            for norm, entity_id in self._all(f"SELECT norm, entity_id FROM entity_aliases WHERE tenant = ? AND norm "
                                             f"IN ({_marks(len(chunk))})", [tenant, *chunk]):
                out.update((name, int(entity_id)) for name in by_norm[str(norm)])
        return out

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts (step 7): one row per entity and viewer, none per mention (counting the
        # mentions' index took 1.3-2 s for a tenant of 1M memories)
        kind_sql = " AND e.kind = ?" if kind is not None else ""
        rows = self._all("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT CAST(substr(key, 1, "
                         "instr(key, char(31)) - 1) AS INTEGER) AS entity_id, sum(n) AS n FROM counts WHERE "
                         "tenant = ? AND scope = 'mention' AND substr(key, instr(key, char(31)) + 1) IN ('', ?) "
                         f"GROUP BY 1) c JOIN entities e ON e.id = c.entity_id AND e.tenant = ?{kind_sql} "
                         "WHERE c.n > 0 ORDER BY c.n DESC, e.name, e.id LIMIT ?",
                         [tenant, _viewer(viewer), tenant, *([kind] if kind is not None else []),
                          -1 if limit is None else limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for entity_id in dict.fromkeys(int(i) for i in entity_ids):
            rows = self._all(f"SELECT mem_id FROM mentions WHERE entity_id = ? AND tenant = ? AND {_VISIBLE} "
                             "ORDER BY ts_us DESC, mem_id DESC LIMIT ?",
                             (entity_id, tenant, _viewer(viewer), -1 if limit is None else limit))
            if rows:
                out[entity_id] = [int(r[0]) for r in rows]
        return out

    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        wanted = list(dict.fromkeys(int(i) for i in entity_ids))
        if not wanted:
            return {}
        # the kept counts (step 7): the shared and the viewer's private count of each entity, two key reads
        # (counted from the index up to ``cap``, a hub entity cost cap steps: 4k at 1M memories)
        rows = self._all("SELECT CAST(e.value AS INTEGER), (SELECT coalesce(sum(c.n), 0) FROM counts c WHERE "
                         "c.tenant = ? AND c.scope = 'mention' AND c.key IN (e.value || char(31), "
                         "e.value || char(31) || ?)) FROM json_each(?) AS e",
                         (tenant, _viewer(viewer), json.dumps(wanted)))
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for chunk in _chunks(mem_ids):
            # by the primary key: "+tenant" keeps the planner off the tenant index, which scanned every
            # mention of the tenant (a check on each row found, as for memories)
            for mem_id, entity_id in self._all(f"SELECT mem_id, entity_id FROM mentions WHERE mem_id IN "
                                               f"({_marks(len(chunk))}) AND +tenant = ? ORDER BY mem_id, entity_id",
                                               [*chunk, tenant]):
                out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        seen: dict[EntityRelation, None] = {}
        for chunk in _chunks(entity_ids):
            marks = _marks(len(chunk))
            for row in self._all(f"SELECT src, dst, label, mem_id FROM relations WHERE (src IN ({marks}) OR dst IN "
                                 f"({marks})) AND tenant = ? AND {_VISIBLE} ORDER BY src, dst, label, mem_id",
                                 [*chunk, *chunk, tenant, _viewer(viewer)]):
                seen[EntityRelation(int(row[0]), int(row[1]), str(row[2]), int(row[3]))] = None
        return list(seen)

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        if ids is None:
            rows = self._all("SELECT id, name, kind, created_us FROM entities WHERE tenant = ? ORDER BY id", (tenant,))
        else:
            rows = sorted((tuple(r) for chunk in _chunks(ids) for r in self._all(
                f"SELECT id, name, kind, created_us FROM entities WHERE tenant = ? AND id IN ({_marks(len(chunk))})",
                [tenant, *chunk])), key=lambda r: int(r[0]))
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for norm, viewer in self._all("SELECT norm, viewer FROM alias_seen WHERE tenant = ?", (tenant,)):
            out.setdefault(str(norm), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self._all(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = ? ORDER BY mem_id, entity_id", (tenant,))]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self._all(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = ? ORDER BY src, dst, label, mem_id",
            (tenant,))]


class SqliteEntityWrites:
    """The entity rows of one write transaction (``cur``, ``allocate_ids`` and ``effects`` come from it)."""

    cur: sqlite3.Cursor

    def allocate_ids(self, n: int) -> list[int]:
        raise NotImplementedError

    def _touched(self, tenant: str) -> None:
        raise NotImplementedError

    # ---- graph.entity_link.EntityRows ----------------------------------------------------------
    def lookup_norms(self, tenant: str, norms: Sequence[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for start in range(0, len(norms), _CHUNK):
            chunk = list(norms[start:start + _CHUNK])
            out.update({str(n): int(e) for n, e in self.cur.execute(
                f"SELECT norm, entity_id FROM entity_aliases WHERE tenant = ? AND norm IN ({_marks(len(chunk))})",
                [tenant, *chunk])})
        return out

    def create_entity(self, tenant: str, name: str, kind: str | None, now_us: int) -> int:
        entity_id = self.allocate_ids(1)[0]
        self.cur.execute("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (?, ?, ?, ?, ?)",
                         (entity_id, tenant, name, kind, now_us))
        return entity_id

    def add_alias(self, tenant: str, entity_id: int, norm: str, alias: str) -> int:
        self.cur.execute("INSERT OR IGNORE INTO entity_aliases (tenant, norm, entity_id, alias, pos) VALUES "
                         "(?, ?, ?, ?, (SELECT coalesce(max(pos), -1) + 1 FROM entity_aliases WHERE entity_id = ?))",
                         (tenant, norm, entity_id, alias, entity_id))
        if self.cur.rowcount:
            return entity_id
        return int(self.cur.execute("SELECT entity_id FROM entity_aliases WHERE tenant = ? AND norm = ?",
                                    (tenant, norm)).fetchone()[0])

    def drop_entity(self, tenant: str, entity_id: int) -> None:
        self.cur.execute("DELETE FROM entities WHERE id = ? AND tenant = ?", (entity_id, tenant))

    def fill_kind(self, tenant: str, entity_id: int, kind: str) -> None:
        self.cur.execute("UPDATE entities SET kind = ? WHERE id = ? AND tenant = ? AND kind IS NULL",
                         (kind, entity_id, tenant))

    def see_aliases(self, tenant: str, viewer: str, norms: Sequence[str]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO alias_seen (tenant, norm, viewer) VALUES (?, ?, ?)",
                             [(tenant, n, viewer) for n in norms])

    def write_mentions(self, tenant: str, writer: Writer, entity_ids: Sequence[int]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             [(writer.mem_id, e, tenant, writer.ts_us, int(writer.shared), writer.agent)
                              for e in entity_ids])

    def write_relations(self, tenant: str, writer: Writer, rows: Sequence[tuple[int, int, str]]) -> None:
        self.cur.executemany("INSERT OR IGNORE INTO relations (src, dst, label, mem_id, tenant, shared, agent) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [(s, d, label, writer.mem_id, tenant, int(writer.shared), writer.agent)
                              for s, d, label in rows])

    # ---- graph.api.GraphTxn ------------------------------------------------------------------
    def _writer(self, tenant: str, mem_id: int) -> Writer | None:
        found = self.cur.execute("SELECT ts_us, visibility, agent FROM memories WHERE id = ? AND tenant = ?",
                                 (mem_id, tenant)).fetchone()
        return None if found is None else Writer(mem_id, int(found[0]), found[1] == "tenant", str(found[2]))

    def link_entities(self, tenant: str, mem_id: int, entities: Sequence[EntitySpec],
                      relations: Sequence[RelationSpec], now_us: int) -> list[int]:
        writer = self._writer(tenant, mem_id)
        if writer is None or not (entities or relations):
            return []
        self._touched(tenant)
        return link(self, tenant, writer, entities, relations, now_us)

    def _entity_tenant_ok(self, tenant: str, *ids: int) -> bool:
        rows = self.cur.execute(f"SELECT count(*) FROM entities WHERE tenant = ? AND id IN ({_marks(len(ids))})",
                                [tenant, *ids]).fetchone()
        return int(rows[0]) == len(set(ids))

    def merge_entities(self, tenant: str, keep: int, merge: int) -> bool:
        if keep == merge or not self._entity_tenant_ok(tenant, keep, merge):
            return False
        cur = self.cur
        top = int(cur.execute("SELECT coalesce(max(pos), -1) FROM entity_aliases WHERE entity_id = ?",
                              (keep,)).fetchone()[0])
        cur.execute("UPDATE entity_aliases SET entity_id = ?, pos = pos + ? WHERE entity_id = ?",
                    (keep, top + 1, merge))
        cur.execute("INSERT OR IGNORE INTO mentions (mem_id, entity_id, tenant, ts_us, shared, agent) "
                    "SELECT mem_id, ?, tenant, ts_us, shared, agent FROM mentions WHERE entity_id = ?", (keep, merge))
        cur.execute("DELETE FROM mentions WHERE entity_id = ?", (merge,))
        cur.execute("INSERT OR IGNORE INTO relations (src, dst, label, mem_id, tenant, shared, agent) "
                    "SELECT CASE src WHEN ? THEN ? ELSE src END, CASE dst WHEN ? THEN ? ELSE dst END, label, mem_id, "
                    "tenant, shared, agent FROM relations WHERE (src = ? OR dst = ?) AND tenant = ?",
                    (merge, keep, merge, keep, merge, merge, tenant))
        cur.execute("DELETE FROM relations WHERE (src = ? OR dst = ?) AND tenant = ?", (merge, merge, tenant))
        cur.execute("DELETE FROM relations WHERE src = ? AND dst = ?", (keep, keep))
        cur.execute("UPDATE entities SET kind = (SELECT kind FROM entities WHERE id = ?) WHERE id = ? AND kind IS NULL",
                    (merge, keep))
        cur.execute("DELETE FROM entities WHERE id = ?", (merge,))
        self._touched(tenant)
        return True

    def restore_entity(self, tenant: str, record: EntityRecord) -> bool:
        owner = self.cur.execute("SELECT tenant FROM entities WHERE id = ?", (record.id,)).fetchone()
        if owner is not None and owner[0] != tenant:
            return False
        if owner is None:
            self.cur.execute("INSERT INTO entities (id, tenant, name, kind, created_us) VALUES (?, ?, ?, ?, ?)",
                             (record.id, tenant, record.name, record.kind, record.created_us))
        elif record.kind:
            self.fill_kind(tenant, record.id, record.kind)
        for alias in (record.name, *record.aliases):
            self.add_alias(tenant, record.id, entity_norm(alias), alias)
        self._touched(tenant)
        return owner is None

    def restore_mentions(self, tenant: str, mem_id: int, entity_ids: Sequence[int]) -> int:
        writer = self._writer(tenant, mem_id)
        wanted = [e for e in dict.fromkeys(entity_ids) if self._entity_tenant_ok(tenant, e)]
        if writer is None or not wanted:
            return 0
        self.write_mentions(tenant, writer, wanted)
        self._touched(tenant)
        return max(0, self.cur.rowcount)  # the rows this statement wrote (total_changes counts its triggers' too)

    def restore_alias_views(self, tenant: str, mem_id: int, names: Sequence[str]) -> None:
        writer = self._writer(tenant, mem_id)
        if writer is not None and names:
            self.see_aliases(tenant, seen_by(writer), list(dict.fromkeys(entity_norm(n) for n in names)))

    def restore_relations(self, tenant: str, relations: Sequence[EntityRelation]) -> int:
        written = 0
        for rel in relations:
            writer = self._writer(tenant, rel.mem_id)
            if writer is None or rel.src == rel.dst or not self._entity_tenant_ok(tenant, rel.src, rel.dst):
                continue
            before = self.cur.connection.total_changes
            self.write_relations(tenant, writer, [(rel.src, rel.dst, rel.label)])
            written += self.cur.connection.total_changes - before
        if written:
            self._touched(tenant)
        return written

    def erase_entity_links(self, tenant: str, mentions: Sequence[tuple[int, int]],
                           relations: Sequence[EntityRelation]) -> int:
        gone = 0
        for mem_id, entity_id in mentions:
            gone += self.cur.execute("DELETE FROM mentions WHERE mem_id = ? AND entity_id = ? AND tenant = ?",
                                     (mem_id, entity_id, tenant)).rowcount
        for r in relations:
            gone += self.cur.execute("DELETE FROM relations WHERE src = ? AND dst = ? AND label = ? AND mem_id = ? "
                                     "AND tenant = ?", (r.src, r.dst, r.label, r.mem_id, tenant)).rowcount
        self._touched(tenant)
        return gone

    def erase_entity_rows(self, mem_id: int) -> None:
        """A deleted memory's MENTIONS and the RELATED edges it declared (its entities stay)."""
        self.cur.execute("DELETE FROM mentions WHERE mem_id = ?", (mem_id,))
        self.cur.execute("DELETE FROM relations WHERE mem_id = ?", (mem_id,))
