"""Read-only checks that both stores of a data directory agree (used by the reliability tests).

They look below the service API on purpose: Chroma's ids per tenant, the graph store's time
index and counts, its stored rows, each tenant's lexical index and the intent journal (read
through the maintenance seam, so the same checks hold on SQLite and PostgreSQL) must all
describe the same set of memories.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from memory_core import MemoryCore
from memory_core.refs import memory_ref

# Which intensity the reliability tests run at: `make test` (CI) or `make reliability`.
LONG = os.environ.get("MEMORY_CORE_RELIABILITY", "").strip().lower() == "long"


@dataclass(frozen=True)
class TenantView:
    """One tenant's memory refs as each store sees them."""

    vectors: set[str]
    graph: set[str]
    sqlite: set[str]
    fts: set[str]
    count: int


def all_tenants(core: MemoryCore) -> set[str]:
    """Every tenant either store knows about (a leak in one store still shows up here)."""
    parts = core.operator_parts()
    return set(parts.maintenance.tenants_present()) | set(parts.vectors.tenants()) | set(parts.graph.tenants())


def tenant_view(core: MemoryCore, tenant: str) -> TenantView:
    sqlite_ids = {memory_ref(m.node.id) for m in core.operator_parts().maintenance.memory_rows(tenant)}
    fts_ids = {memory_ref(i) for i in core.operator_parts().maintenance.lexical_state(tenant).indexed}
    episode_ids = {f"ep:{i}" for i in core.operator_parts().maintenance.episode_ids(tenant)}
    vectors = set(core._vectors.all_ids(tenant))
    missing_episodes = episode_ids - vectors
    assert not missing_episodes, f"{tenant}: episodes without a Chroma record: {sorted(missing_episodes)[:5]}"
    return TenantView(
        vectors=vectors - episode_ids,  # an episode's record is checked above; the rest must be memories
        graph={memory_ref(k[1]) for k in core._graph.iter_newest(tenant, None)},
        sqlite=sqlite_ids,
        fts=fts_ids,
        count=core._graph.count(tenant),
    )


def journal_rows(core: MemoryCore) -> list[tuple[str, str, str]]:
    return [(e.op, e.tenant, e.item_id) for e in core.operator_parts().maintenance.journal()]


def assert_stores_agree(core: MemoryCore, expected: dict[str, set[str]] | None = None) -> dict[str, TenantView]:
    """Both stores hold exactly the same memories per tenant, and (if given) exactly ``expected``.

    Also: no journal entry is pending, the FTS index holds one document per memory, the
    graph's count matches, and every Chroma record's content and tenant match SQLite's.
    """
    tenants = all_tenants(core) | set(expected or {})
    views: dict[str, TenantView] = {}
    for tenant in sorted(tenants):
        view = tenant_view(core, tenant)
        views[tenant] = view
        assert view.vectors == view.graph, (
            f"tenant {tenant}: Chroma-only {sorted(view.vectors - view.graph)}, "
            f"graph-only {sorted(view.graph - view.vectors)}"
        )
        assert view.graph == view.sqlite, f"tenant {tenant}: in-memory graph differs from SQLite"
        assert view.fts == view.sqlite, (
            f"tenant {tenant}: FTS-only {sorted(view.fts - view.sqlite)}, "
            f"unindexed {sorted(view.sqlite - view.fts)}"
        )
        assert view.count == len(view.graph), f"tenant {tenant}: memory_count {view.count} != {len(view.graph)}"
        if expected is not None:
            want = expected.get(tenant, set())
            assert view.graph == want, (
                f"tenant {tenant}: unexpected {sorted(view.graph - want)}, missing {sorted(want - view.graph)}"
            )
        assert_vector_records_match(core, tenant, view.graph)
    assert journal_rows(core) == [], f"journal entries left behind: {journal_rows(core)}"
    return views


def assert_vector_records_match(core: MemoryCore, tenant: str, refs: set[str]) -> None:
    """Each Chroma record carries its own tenant and the same content as the graph store."""
    if not refs:
        return
    documents = getattr(core._vectors, "documents", None)
    assert documents is not None, "the vector store cannot list its documents"
    records = documents(tenant, sorted(refs))
    assert set(records) == refs
    contents = core._graph.contents(tenant, [int(ref.split(":", 1)[1]) for ref in refs])
    assert {memory_ref(i) for i in contents} == refs
    for ref, (document, meta) in records.items():
        assert meta.get("tenant") == tenant, f"{ref}: Chroma metadata names tenant {meta.get('tenant')!r}"
        assert document == contents[int(ref.split(":", 1)[1])], (
            f"{ref}: Chroma document differs from the graph store's content"
        )
