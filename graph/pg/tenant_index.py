"""The PostgreSQL store's :class:`graph.api.TenantIndex`: the tenants (those with memories) and each
tenant's agents (its AGENT nodes), whose name index is rebuilt when the tenant's version moved."""

from __future__ import annotations

import json

from graph.agent_names import AgentNameIndex
from graph.api import AGENT, TenantIndex
from graph.pg.queries import PgQueries
from graph.pg.versioned_cache import VersionedCache


class PgTenantIndex(TenantIndex):
    """Tenants and agents; each tenant's :class:`AgentNameIndex` kept under the version it was read at."""

    def __init__(self, q: PgQueries, cache: VersionedCache) -> None:
        self.q = q
        self.cache = cache
        self._agent_indexes: dict[str, tuple[int, AgentNameIndex]] = {}

    def tenants(self) -> list[str]:
        return [str(r[0]) for r in self.q.rows("SELECT tenant FROM tenant_state WHERE memories > 0 ORDER BY tenant",
                                               [])]

    def agents(self, tenant: str) -> frozenset[str]:
        rows = self.q.rows("SELECT attrs FROM nodes WHERE tenant = %s AND kind = %s", [tenant, AGENT])
        return frozenset(str(json.loads(r[0])["agent"]) for r in rows)

    def agent_names(self, tenant: str) -> AgentNameIndex:
        """The tenant's agent-name index, rebuilt when the tenant's version moved."""
        version = self.cache.version(tenant)
        cached = self._agent_indexes.get(tenant)
        if cached is not None and cached[0] == version:
            return cached[1]
        index = AgentNameIndex()
        for name in sorted(self.agents(tenant)):
            index.add(name)
        self._agent_indexes[tenant] = (version, index)
        return index

    def forget(self) -> None:
        self._agent_indexes.clear()
