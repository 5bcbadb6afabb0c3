"""The PostgreSQL store's :class:`graph.api.EntityIndex`: entities, their mentions and relations as a
viewer sees them, over the tables and SQL pieces of :mod:`graph.pg.entities`; semantics follow
:mod:`graph.sqlite.entity_index` method by method. Mention counts are the kept ones (schema step 9)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from graph.api import EntityIndex, EntityNode, EntityRecord, EntityRelation, entity_node, entity_norm
from graph.entity_values import display_names, name_keys, resolve_key, unique_aliases
from graph.pg.entities import KEPT, KEYS_SQL, SEEN, VISIBLE, held_keys, id_list, viewer_key
from graph.pg.queries import PgQueries


class PgEntityIndex(EntityIndex):
    """Entity reads by id, name, mention and relation, each filtered for the viewer."""

    def __init__(self, q: PgQueries) -> None:
        self.q = q

    def _aliases(self, ids: Sequence[int], viewer: str | None, *, everyone: bool = False) -> dict[int, tuple[str, ...]]:
        out: dict[int, list[str]] = {}
        seen, extra = ("", []) if everyone else (f" AND {SEEN}", [viewer_key(viewer)])
        for entity_id, alias in self.q.rows(f"SELECT a.entity_id, a.alias FROM entity_aliases a WHERE a.entity_id = "
                                            f"ANY(%s::bigint[]){seen} ORDER BY a.entity_id, a.pos",
                                            [list(ids), *extra]):
            out.setdefault(int(entity_id), []).append(str(alias))
        return {k: unique_aliases(v) for k, v in out.items()}

    def _nodes(self, tenant: str, rows: list[tuple[Any, ...]], viewer: str | None) -> list[EntityNode]:
        aliases = self._aliases([int(r[0]) for r in rows], viewer)
        return [entity_node(int(i), tenant, kind, aliases.get(int(i), ()), int(created), int(n))
                for i, _name, kind, created, n in rows]

    def entity(self, tenant: str, entity_id: int, viewer: str | None) -> EntityNode | None:
        rows = self.q.rows(f"SELECT e.id, e.name, e.kind, e.created_us, {KEPT.format(t='e.tenant', e='e.id')} "
                           f"FROM entities e WHERE e.id = %s AND e.tenant = %s",
                           [viewer_key(viewer), entity_id, tenant])
        rows = [r for r in rows if int(r[4]) > 0]
        return self._nodes(tenant, rows, viewer)[0] if rows else None

    def entity_names(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> dict[int, str]:
        seen = [int(r[0]) for r in self.q.rows(
            f"SELECT e.id FROM entities e WHERE e.tenant = %s AND e.id = ANY(%s::bigint[]) AND "
            f"{KEPT.format(t='e.tenant', e='e.id')} > 0", [tenant, id_list(entity_ids), viewer_key(viewer)])]
        return display_names(seen, self._aliases(seen, viewer)) if seen else {}

    def entity_by_name(self, tenant: str, name: str, viewer: str | None) -> EntityNode | None:
        entity_id = self.entity_ids(tenant, [name], viewer).get(name)
        return None if entity_id is None else self.entity(tenant, entity_id, viewer)

    def entity_ids(self, tenant: str, names: Sequence[str], viewer: str | None = None) -> dict[str, int]:
        norms = {name: entity_norm(name) for name in names}
        if not norms:
            return {}
        keys = [k for n in dict.fromkeys(norms.values()) for k in name_keys(n, viewer)]
        found = held_keys(self.q.rows(KEYS_SQL, [tenant, keys]))
        resolved = {name: resolve_key(found, norm, viewer) for name, norm in norms.items()}
        return {name: e for name, e in resolved.items() if e is not None}

    def entities(self, tenant: str, viewer: str | None, *, limit: int | None = None,
                 kind: str | None = None) -> list[EntityNode]:
        # summed off the kept counts: one row per entity and viewer, none per mention
        rows = self.q.rows("SELECT e.id, e.name, e.kind, e.created_us, c.n FROM (SELECT split_part(key, chr(31), 1)"
                           "::bigint AS entity_id, sum(n) AS n FROM counts WHERE tenant = %s AND scope = 'mention' AND "
                           "split_part(key, chr(31), 2) IN ('', %s) GROUP BY 1) c JOIN entities e ON "
                           "e.id = c.entity_id AND e.tenant = %s AND (%s::text IS NULL OR e.kind = %s) WHERE c.n > 0 "
                           "ORDER BY c.n DESC, e.name COLLATE \"C\", e.id LIMIT %s",
                           [tenant, viewer_key(viewer), tenant, kind, kind, limit])
        return self._nodes(tenant, rows, viewer)

    def entity_mentions(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                        limit: int | None = None) -> dict[int, list[int]]:
        rows = self.q.rows(f"SELECT w.e, x.mem_id FROM unnest(%s::bigint[]) w(e), LATERAL (SELECT mem_id FROM "
                           f"mentions WHERE entity_id = w.e AND tenant = %s AND {VISIBLE} ORDER BY ts_us DESC, "
                           f"mem_id DESC LIMIT %s) x", [id_list(entity_ids), tenant, viewer_key(viewer), limit])
        out: dict[int, list[int]] = {}
        for entity_id, mem_id in rows:
            out.setdefault(int(entity_id), []).append(int(mem_id))
        return out

    def entity_mention_counts(self, tenant: str, entity_ids: Iterable[int], viewer: str | None,
                              cap: int) -> dict[int, int]:
        rows = self.q.rows(f"SELECT w.e, {KEPT.format(t='%s', e='w.e')} FROM unnest(%s::bigint[]) w(e)",
                           [tenant, viewer_key(viewer), id_list(entity_ids)])
        return {int(e): min(int(n), max(0, cap)) for e, n in rows}

    def memory_entities(self, tenant: str, mem_ids: Iterable[int]) -> dict[int, list[int]]:
        out: dict[int, list[int]] = {}
        for mem_id, entity_id in self.q.rows("SELECT mem_id, entity_id FROM mentions WHERE mem_id = "
                                             "ANY(%s::bigint[]) AND tenant = %s ORDER BY mem_id, entity_id",
                                             [id_list(mem_ids), tenant]):
            out.setdefault(int(mem_id), []).append(int(entity_id))
        return out

    def entity_relations(self, tenant: str, entity_ids: Iterable[int], viewer: str | None) -> list[EntityRelation]:
        wanted = id_list(entity_ids)
        rows = self.q.rows(f"SELECT src, dst, label, mem_id FROM relations WHERE (src = ANY(%s::bigint[]) OR "
                           f"dst = ANY(%s::bigint[])) AND tenant = %s AND {VISIBLE} "
                           f"ORDER BY src, dst, label COLLATE \"C\", mem_id",
                           [wanted, wanted, tenant, viewer_key(viewer)])
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in rows]

    def entity_records(self, tenant: str, ids: Iterable[int] | None = None) -> list[EntityRecord]:
        wanted = None if ids is None else id_list(ids)
        rows = self.q.rows("SELECT id, name, kind, created_us FROM entities WHERE tenant = %s AND (%s::bigint[] IS "
                           "NULL OR id = ANY(%s::bigint[])) ORDER BY id", [tenant, wanted, wanted])
        aliases = self._aliases([int(r[0]) for r in rows], None, everyone=True)
        return [EntityRecord(int(i), str(n), k, aliases.get(int(i), ()), int(c)) for i, n, k, c in rows]

    def alias_views(self, tenant: str) -> dict[tuple[int, str], frozenset[str]]:
        out: dict[tuple[int, str], set[str]] = {}
        for entity_id, alias, viewer in self.q.rows(
                "SELECT a.entity_id, a.alias, s.viewer FROM entity_aliases a JOIN alias_seen s ON s.tenant = a.tenant "
                "AND s.norm = a.norm WHERE a.tenant = %s", [tenant]):
            out.setdefault((int(entity_id), entity_norm(str(alias))), set()).add(str(viewer))
        return {k: frozenset(v) for k, v in out.items()}

    def all_mentions(self, tenant: str) -> list[tuple[int, int]]:
        return [(int(m), int(e)) for m, e in self.q.rows(
            "SELECT mem_id, entity_id FROM mentions WHERE tenant = %s ORDER BY mem_id, entity_id", [tenant])]

    def all_relations(self, tenant: str) -> list[EntityRelation]:
        return [EntityRelation(int(s), int(d), str(lb), int(m)) for s, d, lb, m in self.q.rows(
            "SELECT src, dst, label, mem_id FROM relations WHERE tenant = %s "
            "ORDER BY src, dst, label COLLATE \"C\", mem_id", [tenant])]
