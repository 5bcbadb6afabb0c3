"""The SQLite store's :class:`graph.api.TenantIndex`: the tenants (those with memories, from the kept
counts) and each tenant's agents (its AGENT nodes), whose name index stays in a small LRU that follows
this process's commits."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from graph.agent_names import AgentNameIndex
from graph.api import AGENT, TenantIndex
from graph.node_cache import LRU
from graph.sqlite.queries import SqliteQueries

if TYPE_CHECKING:
    from graph.sqlite.txn import Effects

AGENT_INDEX_TENANTS = 256


class SqliteTenantIndex(TenantIndex):
    """Tenants and agents; each tenant's :class:`AgentNameIndex` is built once and kept up to date."""

    def __init__(self, q: SqliteQueries) -> None:
        self.q = q
        self.agent_indexes: LRU[str, AgentNameIndex] = LRU(AGENT_INDEX_TENANTS)

    def tenants(self) -> list[str]:
        return [str(r[0]) for r in self.q.all("SELECT tenant FROM counts WHERE scope = 'all' AND key = '' AND n > 0 "
                                              "ORDER BY tenant", ())]

    def agent_names(self, tenant: str) -> AgentNameIndex:
        index = self.agent_indexes.get(tenant)
        if index is None:
            index = AgentNameIndex()
            for (attrs,) in self.q.all("SELECT attrs FROM nodes WHERE tenant = ? AND kind = ?", (tenant, AGENT)):
                index.add(str(json.loads(attrs)["agent"]))
            self.agent_indexes.put(tenant, index)
        return index

    def agents(self, tenant: str) -> frozenset[str]:
        return frozenset(self.agent_names(tenant).names)

    def committed(self, fx: Effects) -> None:
        """Agents a commit wrote join their tenant's index (when it is kept)."""
        for tenant, agent in fx.agents:
            if (index := self.agent_indexes.get(tenant)) is not None:
                index.add(agent)

    def forget(self) -> None:
        self.agent_indexes.clear()
