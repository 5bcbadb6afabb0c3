"""The SQLite store's :class:`graph.api.EntityIndex`: entities, their mentions and relations as a
viewer sees them (shared mentions and the viewer's own private ones), over the tables and SQL pieces
of :mod:`graph.sqlite.entities`. Mention counts are the kept ones (schema step 7): two key reads an
entity, whatever its number of mentions."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from graph.api import EntityIndex, EntityNode, EntityRecord, EntityRelation, entity_node, entity_norm
from graph.entity_values import display_names, name_keys, resolve_key, unique_aliases
from graph.sqlite.entities import SEEN, VISIBLE, chunks, lookup_keys_with, qmarks, viewer_key
from graph.sqlite.queries import SqliteQueries


class SqliteEntityIndex(EntityIndex):
    """Entity reads by id, name, mention and relation, each filtered for the viewer."""

    def __init__(self, q: SqliteQueries) -> None:
        self.q = q

    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        """Each entity's aliases in order: all of them (``everyone``) or those the viewer may read."""
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {SEEN}", [viewer_key(viewer)])
        for chunk in chunks(ids):
            for entity_id, alias in self.q.all(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id "
                                               f"IN ({qmarks(len(chunk))}){seen} ORDER BY a.entity_id, a.pos",
                                               [*chunk, *extra]):
                out.setdefault(int(entity_id), []).append(str(alias))
        return {k: unique_aliases(v) for k, v in out.items()}

    def _nodes(self, tenant: str, rows: list[Any], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        # the kept counts (step 7): two key reads, whatever the number of mentions
        rows = self.q.all("SELECT e.id, e.name, e.kind, e.created_us, (SELECT coalesce(sum(c.n), 0) FROM counts c "
                          "WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN (e.id || char(31), "
                          "e.id || char(31) || ?)) FROM entities e WHERE e.id = ? AND e.tenant = ?",
                          (viewer_key(viewer), entity_id, tenant))
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for chunk in chunks(entity_ids) for r in self.q.all(
            f"SELECT e.id FROM entities e WHERE e.tenant = ? AND e.id IN ({qmarks(len(chunk))}) AND (SELECT "
            "coalesce(sum(c.n), 0) FROM counts c WHERE c.tenant = e.tenant AND c.scope = 'mention' AND c.key IN "
            "(e.id || char(31), e.id || char(31) || ?)) > 0", [tenant, *chunk, viewer_key(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        entity_id = self.entity_ids(tenant, [name], viewer).get(name)
        return None if entity_id is None else self.entity(tenant, entity_id, viewer)

    def entity_ids(self, tenant: str, names: Sequence[str], viewer: str | None = None) -> dict[str, int]:
        norms = {name: entity_norm(name) for name in names}
        found = lookup_keys_with(self.q.all, tenant, [k for n in dict.fromkeys(norms.values())
                                                      for k in name_keys(n, viewer)])
        resolved = {name: resolve_key(found, norm, viewer) for name, norm in norms.items()}
        return {name: e for name, e in resolved.items() if e is not None}

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts (step 7): one row per entity and viewer, none per mention (counting the
        # mentions' index took 1.3-2 s for a tenant of 1M memories)
        kind_sql = " AND e.kind = ?" if kind is not None else ""
        rows = self.q.all("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT CAST(substr(key, 1, "
                          "instr(key, char(31)) - 1) AS INTEGER) AS entity_id, sum(n) AS n FROM counts WHERE "
                          "tenant = ? AND scope = 'mention' AND substr(key, instr(key, char(31)) + 1) IN ('', ?) "
                          f"GROUP BY 1) c JOIN entities e ON e.id = c.entity_id AND e.tenant = ?{kind_sql} "
                          "WHERE c.n > 0 ORDER BY c.n DESC, e.name, e.id LIMIT ?",
                          [tenant, viewer_key(viewer), tenant, *([kind] if kind is not None else []),
                           -1 if limit is None else limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for entity_id in dict.fromkeys(int(i) for i in entity_ids):
            rows = self.q.all(f"SELECT mem_id FROM mentions WHERE entity_id = ? AND tenant = ? AND {VISIBLE} "
                              "ORDER BY ts_us DESC, mem_id DESC LIMIT ?",
                              (entity_id, tenant, viewer_key(viewer), -1 if limit is None else limit))
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
        rows = self.q.all("SELECT CAST(e.value AS INTEGER), (SELECT coalesce(sum(c.n), 0) FROM counts c WHERE "
                          "c.tenant = ? AND c.scope = 'mention' AND c.key IN (e.value || char(31), "
                          "e.value || char(31) || ?)) FROM json_each(?) AS e",
                          (tenant, viewer_key(viewer), json.dumps(wanted)))
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for chunk in chunks(mem_ids):
            # by the primary key: "+tenant" keeps the planner off the tenant index, which scanned every
            # mention of the tenant (a check on each row found, as for memories)
            for mem_id, entity_id in self.q.all(f"SELECT mem_id, entity_id FROM mentions WHERE mem_id IN "
                                                f"({qmarks(len(chunk))}) AND +tenant = ? ORDER BY mem_id, entity_id",
                                                [*chunk, tenant]):
                out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        seen: dict[EntityRelation, None] = {}
        for chunk in chunks(entity_ids):
            marks = qmarks(len(chunk))
            for row in self.q.all(f"SELECT src, dst, label, mem_id FROM relations WHERE (src IN ({marks}) OR dst IN "
                                  f"({marks})) AND tenant = ? AND {VISIBLE} ORDER BY src, dst, label, mem_id",
                                  [*chunk, *chunk, tenant, viewer_key(viewer)]):
                seen[EntityRelation(int(row[0]), int(row[1]), str(row[2]), int(row[3]))] = None
        return list(seen)

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        if ids is None:
            rows = self.q.all("SELECT id, name, kind, created_us FROM entities WHERE tenant = ? ORDER BY id",
                              (tenant,))
        else:
            rows = sorted((tuple(r) for chunk in chunks(ids) for r in self.q.all(
                f"SELECT id, name, kind, created_us FROM entities WHERE tenant = ? AND id IN ({qmarks(len(chunk))})",
                [tenant, *chunk])), key=lambda r: int(r[0]))
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[tuple[int, str], frozenset[str]]:
        out: dict[tuple[int, str], set[str]] = {}
        for entity_id, alias, viewer in self.q.all(
                "SELECT a.entity_id, a.alias, s.viewer FROM entity_aliases a JOIN alias_seen s ON s.tenant = a.tenant "
                "AND s.norm = a.norm WHERE a.tenant = ?", (tenant,)):
            out.setdefault((int(entity_id), entity_norm(str(alias))), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self.q.all(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = ? ORDER BY mem_id, entity_id", (tenant,))]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self.q.all(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = ? ORDER BY src, dst, label, mem_id",
            (tenant,))]
