"""Operator reads (memory_core.operator.stats): counts per tenant, sessions, stats, graph neighbourhoods."""

from __future__ import annotations

import pytest

from memory_core import MemoryCore
from memory_core.errors import InvalidInputError, NotFoundError, TenantRequiredError
from memory_core.operator.stats import (
    MAX_CHILDREN,
    graph_neighbourhood,
    list_sessions,
    list_tenants,
    tenant_stats,
)

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)


def populate(core: MemoryCore) -> None:
    for i in range(MAX_CHILDREN + 3):
        core.add_memory("acme", "s1", "alice", f"turn {i}")
    core.create_handoff("acme", "s1", "alice", "handoff one")
    core.create_handoff("acme", "s1", "alice", "handoff two")
    core.add_memory("acme", "s2", "bob", "secret", type="note", visibility="agent")
    core.add_memory("globex", "g", "zed", "globex row")


def test_tenants_lists_every_tenant_with_counts_from_both_stores(core: MemoryCore) -> None:
    populate(core)
    rows = {t.tenant: t for t in list_tenants(core.operator_parts())}
    assert set(rows) == {"acme", "globex"}
    assert (rows["acme"].memories, rows["acme"].vectors, rows["acme"].sessions, rows["acme"].agents) == (18, 18, 2, 2)


def test_sessions_show_counts_activity_and_the_latest_handoff(core: MemoryCore) -> None:
    populate(core)
    core.summarize_session("acme", "s1")
    sessions = {s.session: s for s in list_sessions(core.operator_parts(), "acme")}
    s1 = sessions["s1"]
    assert (s1.memories, s1.turns) == (17, 15)
    assert s1.latest_handoff == core.recall("acme", "", type="handoff", limit=1).messages[0].ref
    assert s1.episode is not None and s1.episode.startswith("ep:")
    assert s1.first_activity is not None and s1.first_activity <= str(s1.last_activity)
    assert sessions["s2"].latest_handoff is None
    with pytest.raises(TenantRequiredError):
        list_sessions(core.operator_parts(), "")


def test_stats_count_types_private_rows_agents_and_disk_use(core: MemoryCore) -> None:
    populate(core)
    stats = tenant_stats(core.operator_parts(), "acme")
    assert stats.by_type == {"handoff": 2, "note": 1, "turn": 15}
    assert (stats.memories, stats.private, stats.sessions, stats.agents) == (18, 1, 2, ["alice", "bob"])
    assert stats.disk_bytes["graph_database"] and stats.disk_bytes["graph_database"] > 0
    assert tenant_stats(core.operator_parts(), "nobody").memories == 0


def test_a_graph_neighbourhood_stays_in_its_tenant_and_caps_wide_nodes(core: MemoryCore) -> None:
    populate(core)
    parts = core.operator_parts()
    tree = graph_neighbourhood(parts, "acme", "mem:1", depth=2)
    session = next(e["node"] for e in tree["edges"] if e["kind"] == "IN_SESSION")
    assert session["node"] == "session:acme/s1"
    assert len(session["edges"]) == MAX_CHILDREN and session["more"] == 17 - MAX_CHILDREN
    assert graph_neighbourhood(parts, "acme", "mem:1", depth=0)["edges"] == []
    globex_ref = core.recall("globex", "").messages[0].ref
    with pytest.raises(NotFoundError):
        graph_neighbourhood(parts, "acme", globex_ref)
    with pytest.raises(InvalidInputError):
        graph_neighbourhood(parts, "acme", "mem:1", depth=9)
