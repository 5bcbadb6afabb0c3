"""Stale facts step aside (recall/stale.py): an older fact a newer one about the same entity contradicts is
marked possibly_stale and ranked below it, never hidden; include_stale and deep show it as it was. Only rows
the caller may read take part: another tenant's or another agent's private newer row marks nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.recall.presets import StaleConfig
from tests.support.backends import open_core

OLD = "payments-api is deployed in region eu-west-1."
NEW = "payments-api is deployed in region eu-west-2."
T1, T2 = "2026-03-01T00:00:00+00:00", "2026-06-01T00:00:00+00:00"
SVC = [{"name": "payments-api"}]


@pytest.fixture
def core(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    c = open_core("memory", tmp_path / "data", request)
    yield c
    c.close()


def _rows(core: MemoryCore, tenant: str = "acme", **options: object) -> dict[str, dict[str, object]]:
    result = core.recall(tenant, "which region is payments-api deployed in", **options)  # type: ignore[arg-type]
    return {r.ref: {**r.to_dict(), "rank": i} for i, r in enumerate(result.messages)}


def test_an_older_fact_a_newer_one_contradicts_ranks_below_it_marked(core: MemoryCore) -> None:
    old = core.add_memory("acme", "s1", "ann", OLD, type="fact", timestamp=T1, entities=SVC).ref
    new = core.add_memory("acme", "s2", "bob", NEW, type="fact", timestamp=T2, entities=SVC).ref
    rows = _rows(core)
    assert rows[new]["rank"] < rows[old]["rank"]  # type: ignore[operator]
    assert rows[old]["possibly_stale"] is True and rows[old]["newer"] == new
    reason = rows[old]["match_reason"]
    assert isinstance(reason, dict) and reason["stale"]["newer"] == new and reason["stale"]["cosine"] >= 0.75
    assert "possibly_stale" not in rows[new]
    for options in ({"include_stale": True}, {"deep": True}):  # nothing hidden: as it was
        shown = _rows(core, **options)
        assert set(shown) >= {old, new} and all("possibly_stale" not in r for r in shown.values())
    assert _rows(core, as_of="2026-04-01T00:00:00+00:00").keys() == {old}  # the newer did not exist then
    assert "possibly_stale" not in _rows(core, as_of="2026-04-01T00:00:00+00:00")[old]


def test_another_tenants_or_agents_private_newer_fact_marks_nothing(core: MemoryCore) -> None:
    old = core.add_memory("acme", "s1", "ann", OLD, type="fact", timestamp=T1, entities=SVC).ref
    core.add_memory("other", "s2", "bob", NEW, type="fact", timestamp=T2, entities=SVC)
    private = core.add_memory("acme", "s2", "carl", NEW, type="fact", timestamp=T2, entities=SVC,
                              visibility="agent").ref
    assert "possibly_stale" not in _rows(core)[old]
    assert "possibly_stale" not in _rows(core, viewer="ann")[old]
    assert _rows(core, viewer="carl")[old]["newer"] == private  # its author sees its own note's effect
    assert set(_rows(core, "other")).isdisjoint({old, private})


def test_turns_and_unrelated_facts_are_not_marked(core: MemoryCore) -> None:
    turn_old = core.add_memory("acme", "s1", "ann", OLD, timestamp=T1, entities=SVC).ref  # a turn
    core.add_memory("acme", "s2", "bob", NEW, timestamp=T2, entities=SVC)
    other = core.add_memory("acme", "s3", "ann", "payments-api alerts page the #ops-billing channel.",
                            type="fact", timestamp=T1, entities=SVC).ref
    core.add_memory("acme", "s4", "bob", NEW, type="fact", timestamp=T2, entities=SVC)
    rows = _rows(core)
    assert "possibly_stale" not in rows[turn_old]
    assert other not in rows or "possibly_stale" not in rows[other]


def test_the_stale_rule_is_a_recall_stage_with_its_config_group() -> None:
    from memory_core.recall import engine, stale

    assert stale.step_aside in engine.STAGES
    assert engine.STAGES.index(stale.step_aside) == engine.STAGES.index(engine.order.order) - 1
    cfg = StaleConfig()
    assert 0 < cfg.low < cfg.high and 0 < cfg.step < 1 and "turn" in cfg.skip_types
