"""memory_core.operator.inspector: the reads behind the web inspector, at the library level."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import InvalidInputError
from memory_core.operator import inspector as inspector_module
from memory_core.operator.inspector import Inspector
from memory_core.settings import load_settings

START = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def core(tmp_path: Path) -> Iterator[MemoryCore]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    c = MemoryCore.open(tmp_path / "data", settings=settings, embedder=HashEmbedder(), in_memory_vectors=True)
    yield c
    c.close()


def _fill(core: MemoryCore, n: int, session: str = "big", agents: int = 1) -> list[str]:
    return [r.ref for r in core.add_memories([
        {"tenant": "acme", "session": session, "agent": f"a{i % agents}", "content": f"row {i}",
         "timestamp": (START + timedelta(minutes=i)).isoformat()} for i in range(n)])]


def test_busy_sessions_and_agents_show_the_same_newest_neighbours_as_a_full_walk(
        core: MemoryCore, monkeypatch: pytest.MonkeyPatch) -> None:
    refs = _fill(core, 260, agents=2)
    ins = Inspector(core.operator_parts())
    by_index = ins.neighbourhood("acme", refs[100], depth=2)
    monkeypatch.setattr(inspector_module, "HUB_DEGREE", 10**9)  # force the full edge walk
    walked = ins.neighbourhood("acme", refs[100], depth=2)
    assert {n["id"] for n in by_index.nodes} == {n["id"] for n in walked.nodes}
    assert by_index.truncated and walked.truncated
    assert refs[-1] in {n["id"] for n in by_index.nodes}  # the session's newest memory


def test_growth_counts_memories_per_utc_day_ending_on_the_newest_activity(core: MemoryCore) -> None:
    core.add_memories([{"tenant": "acme", "session": "s", "agent": "a", "content": f"m{i}",
                        "timestamp": (START + timedelta(hours=10 * i)).isoformat()} for i in range(10)])
    view = Inspector(core.operator_parts()).tenants(days=5)
    (acme,) = view.tenants
    assert view.days == ["2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03", "2026-03-04"]  # newest: 03-04 18:00
    assert acme.growth == [0, 3, 2, 3, 2]


def test_timeline_pages_include_every_kind_and_reject_a_turns_cursor(core: MemoryCore) -> None:
    _fill(core, 30, session="s")
    core.create_handoff("acme", "s", "a0", "hand over")
    ins = Inspector(core.operator_parts())
    first = ins.timeline("acme", "s", 20)
    second = ins.timeline("acme", "s", 20, first.next_cursor)
    assert first.rows[0].type == "handoff" and len(first.rows) + len(second.rows) == 31
    assert second.next_cursor is None
    turns_cursor = core.query_recent_turns("acme", "s", limit=5).next_cursor
    with pytest.raises(InvalidInputError):
        ins.timeline("acme", "s", 20, turns_cursor)


def test_summary_peek_writes_nothing_and_marks_a_stored_summary_stale(core: MemoryCore) -> None:
    _fill(core, 5, session="s")
    ins = Inspector(core.operator_parts())
    peek = ins.summary("acme", "s")
    assert peek is not None and peek.ref is None and peek.source == "fallback"
    assert core._graph.session_episode("acme", "s") is None
    episode = core.summarize_session("acme", "s")
    assert ins.summary("acme", "s").ref == episode.ref and not ins.summary("acme", "s").stale  # type: ignore[union-attr]
    core.add_memory("acme", "s", "a0", "one more")
    assert ins.summary("acme", "s").stale  # type: ignore[union-attr]
    assert ins.summary("acme", "empty") is None


def test_an_entitys_mentions_are_its_current_facts_with_superseded_versions_folded_under_them(
        core: MemoryCore) -> None:
    """A corrected memory keeps its old version (valid_to): the entity lists the current version,
    the old ones under it; a version whose correction no longer names the entity is marked
    superseded, with the ref of the version that is current now."""
    orion = [{"name": "Orion", "kind": "incident"}]
    forty = core.add_memory("acme", "ops", "ann", "The Orion outage lasted 40 minutes.", entities=orion,
                            timestamp=START.isoformat()).ref
    fifty_five = core.update_memory("acme", forty, content="The Orion outage lasted 55 minutes.").added.ref
    fifty_seven = core.update_memory("acme", fifty_five, content="The Orion outage lasted 57 minutes.").added.ref
    runbook = core.add_memory("acme", "ops", "bob", "Orion's runbook is in the old wiki.", entities=orion,
                              timestamp=(START + timedelta(minutes=1)).isoformat()).ref
    moved = core.update_memory("acme", runbook, content="The runbook is in the handbook now.").added.ref
    plain = core.add_memory("acme", "ops", "ann", "Orion postmortem is on Friday.", entities=orion,
                            timestamp=(START + timedelta(minutes=2)).isoformat()).ref
    core.add_memory("globex", "ops", "zed", "The Orion outage lasted 3 minutes.", entities=orion)
    entity = core._graph.entity_by_name("acme", "orion", None)
    assert entity is not None
    detail = Inspector(core.operator_parts()).entity("acme", entity.ref)
    facts = {f.row.ref: f for f in detail.facts}
    assert list(facts) == [fifty_seven, plain, runbook]  # newest first; the old versions are not facts of their own
    assert facts[fifty_seven].row.valid_to is None and facts[fifty_seven].current is None
    assert [o.ref for o in facts[fifty_seven].older] == [fifty_five, forty]
    assert all(o.valid_to is not None for o in facts[fifty_seven].older)
    assert facts[plain].older == [] and facts[plain].current is None
    assert facts[runbook].row.valid_to is not None and facts[runbook].current == moved
    assert "3 minutes" not in {o.content for f in detail.facts for o in (f.row, *f.older)}  # acme's rows only
