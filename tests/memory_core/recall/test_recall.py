"""Hybrid recall through the library API, on every backend."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import shared_minilm
from tests.support.backends import open_core

NOW = datetime.now(UTC)


def ago(days: float) -> datetime:
    return NOW - timedelta(days=days)


def contents(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [m.content for m in result.messages]


@pytest.mark.slow
def test_newest_handoff_comes_first_when_filtering_by_type(core: MemoryCore) -> None:
    # Three older handoffs with richer lexical overlap, in a busier session (more graph links).
    rich = "handoff EXP-30 llama.cpp verdict suspended: benchmark llama.cpp EXP-30 verdict pending, suspended runs"
    for days, extra in ((7.0, "first pass"), (4.0, "second pass"), (4.1, "third pass")):
        core.add_memory("acme", "work", "planner", f"{rich} ({extra})", type="handoff", timestamp=ago(days))
        for i in range(3):
            core.add_memory("acme", "work", "planner", f"EXP-30 llama.cpp note {i} verdict", timestamp=ago(days))
    newest = core.add_memory("acme", "today", "planner",
                             "handoff: EXP-30 verdict is in, llama.cpp work suspended; next step is the report",
                             type="handoff").ref
    query = "handoff 2026-04-11 EXP-30 llama.cpp verdict suspended"
    typed = core.recall("acme", query, type="handoff", limit=4)
    assert typed.messages[0].ref == newest
    assert all(m.type == "handoff" for m in typed.messages)
    untyped = core.recall("acme", query, limit=4)
    assert untyped.messages[0].ref != newest  # without the intent signal, relevance may win


def test_a_superseded_handoff_ranks_below_its_successor_even_milliseconds_apart(core: MemoryCore) -> None:
    # the chain's older links match the query better; SUPERSEDES edges, not timestamps, decide
    chain = [core.create_handoff("acme", "s1", "planner", text).ref for text in (
        "handoff: billing queue migration verdict pending; billing queue retries and billing alerts open",
        "handoff: billing queue migration done; retries checked",
        "handoff: next, wire the alerts",
    )]
    core.add_memory("acme", "s2", "coder", "handoff notes: billing queue migration retries", type="handoff",
                    timestamp=ago(30))
    res = core.recall("acme", "billing queue migration retries handoff", type="handoff")
    order = [m.ref for m in res.messages]
    assert [r for r in order if r in chain] == list(reversed(chain))
    reasons = {m.ref: m.match_reason for m in res.messages}
    assert reasons[chain[0]]["superseded_by"] == chain[1] and "superseded_by" not in reasons[chain[2]]


def test_type_filter_recency_gives_a_new_row_about_0_3_over_a_week_old_one(core: MemoryCore) -> None:
    old = core.add_memory("acme", "s", "a", "deploy checklist for friday", type="decision", timestamp=ago(7)).ref
    new = core.add_memory("acme", "s2", "a", "deploy checklist for friday", type="decision").ref
    # two copies of one text isolate the recency signal; collapsed, they would be one row
    res = {m.ref: m.confidence for m in core.recall("acme", "deploy checklist friday", type="decision",
                                                   collapse=False).messages}
    assert res[new] - res[old] == pytest.approx(0.5 * (1 - math.exp(-1)), abs=0.03)
    deep = {m.ref: m.confidence for m in core.recall("acme", "deploy checklist friday", type="decision",
                                                    deep=True).messages}
    assert deep[new] == pytest.approx(deep[old], abs=1e-3)


def test_type_filter_applies_before_the_top_n_cut(core: MemoryCore) -> None:
    core.add_memories([{"tenant": "acme", "session": "s", "agent": "a", "type": "note",
                        "content": f"database migration plan step {i} database migration"} for i in range(60)])
    target = core.add_memory("acme", "s", "a", "we picked postgres after the migration review",
                             type="decision").ref
    res = core.recall("acme", "database migration plan", type="decision", limit=1)
    assert [m.ref for m in res.messages] == [target]


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [("session", "s2", {"beta"}), ("agent", "bob", {"beta"}), ("channel", "discord", {"alpha"}),
     ("source_id", "discord:1", {"alpha"}), ("source_id", "discord:", {"alpha", "gamma"}),
     ("type", "note", {"gamma"})],
)
def test_each_filter_restricts_the_rows(core: MemoryCore, option: str, value: str, expected: set[str]) -> None:
    core.add_memory("acme", "s1", "alice", "alpha launch rocket", channel="discord", source={"id": "discord:123"})
    core.add_memory("acme", "s2", "bob", "beta launch rocket", channel="chat", source={"id": "slack:9"})
    core.add_memory("acme", "s1", "alice", "gamma launch rocket", type="note", source={"id": "discord:77"})
    res = core.recall("acme", "launch rocket", **{option: value})
    assert {m.content.split()[0] for m in res.messages} == expected


def test_project_scopes_all_global_and_bucket_plus_global(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "a", "release notes global", project_id=None)
    core.add_memory("acme", "s", "a", "release notes alpha", project_id="alpha")
    core.add_memory("acme", "s", "a", "release notes beta", project_id="beta")
    words = lambda **kw: {m.content.split()[-1] for m in core.recall("acme", "release notes", **kw).messages}  # noqa: E731
    assert words() == {"global", "alpha", "beta"}
    assert words(project_id="") == {"global"}
    assert words(project_id="alpha") == {"global", "alpha"}


def test_auto_project_resolves_from_configuration(backend: str, tmp_path: Path, request) -> None:  # type: ignore[no-untyped-def]
    c = open_core(backend, tmp_path / "d", request, operating_context={"agents": {"planner": "alpha"}})
    try:
        c.add_memory("acme", "s", "a", "release notes alpha", project_id="alpha")
        c.add_memory("acme", "s", "a", "release notes beta", project_id="beta")
        c.add_memory("acme", "s", "a", "release notes global")
        mapped = c.recall("acme", "release notes", project_id="@auto", viewer="planner")
        assert mapped.resolved_project_id == "alpha" and mapped.operating_context_warning is None
        assert {m.content.split()[-1] for m in mapped.messages} == {"alpha", "global"}
        unmapped = c.recall("acme", "release notes", project_id="@auto", viewer="stranger")
        assert unmapped.operating_context_warning and unmapped.resolved_project_id == ""
        assert {m.content.split()[-1] for m in unmapped.messages} == {"global"}
    finally:
        c.close()


def test_auto_project_without_configuration_is_literal(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "a", "release notes auto", project_id="@auto")
    core.add_memory("acme", "s", "a", "release notes beta", project_id="beta")
    res = core.recall("acme", "release notes", project_id="@auto", viewer="planner")
    assert res.resolved_project_id == "@auto" and res.operating_context_warning is None
    assert {m.content.split()[-1] for m in res.messages} == {"auto"}


def test_a_500_char_prefix_in_exclude_contents_excludes_its_row(core: MemoryCore) -> None:
    long_text = "Incident review: " + " ".join(f"the cache node {i} lost its lease" for i in range(80))
    long_ref = core.add_memory("acme", "s", "a", long_text).ref
    other = core.add_memory("acme", "s", "a", "Incident review: the cache node was fine").ref
    assert long_ref in {m.ref for m in core.recall("acme", "incident review cache node lease").messages}
    res = core.recall("acme", "incident review cache node lease", exclude_contents=["  " + long_text[:500].upper()])
    refs = {m.ref for m in res.messages}
    assert long_ref not in refs and other in refs


@pytest.mark.slow
def test_when_everything_is_below_the_gate_lexical_matches_come_back_flagged(
    backend: str, tmp_path: Path, request  # type: ignore[no-untyped-def]
) -> None:
    # the gate is calibrated for the default embedder, so this test runs the real MiniLM model
    # the gate is set explicitly: this is about the fallback, not the calibrated default
    core = open_core(backend, tmp_path / "d", request, embedder=shared_minilm(), recall={"quality_gate": 0.3})
    request.addfinalizer(core.close)
    core.add_memory("acme", "s", "a", "zebra", timestamp=ago(400))
    for i in range(20):
        core.add_memory("acme", "s", "a", f"unrelated chatter about lunch options number {i}", timestamp=ago(400))
    res = core.recall("acme", "zebra quantum chromodynamics lattice gauge boson spectroscopy theory")
    assert res.gate_fallback is True
    assert contents(res) == ["zebra"]
    assert all(m.match_reason is None for m in res.messages)
    good = core.recall("acme", "lunch options")
    assert good.gate_fallback is False and good.messages


def test_empty_query_returns_the_most_recent_unscored(core: MemoryCore) -> None:
    for i in range(5):
        core.add_memory("acme", "s", "a", f"row {i}", timestamp=ago(5 - i))
    res = core.recall("acme", "", limit=3)
    assert contents(res) == ["row 4", "row 3", "row 2"]
    assert all(m.match_reason is None and m.confidence is None for m in res.messages)
    assert contents(core.recall("acme", "  ", limit=2, session="s")) == ["row 4", "row 3"]


def test_scored_rows_explain_their_match(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "a", "the nightly backup job writes to bucket B-42")
    row = core.recall("acme", "nightly backup B-42").messages[0]
    reason = row.match_reason
    assert reason is not None and reason["signal"] == "confidence"
    assert reason["score"] == pytest.approx(row.confidence, abs=1e-4)
    assert {"cosine", "bm25", "keyword", "rrf", "rsf"} <= set(reason)


def test_private_memories_are_recalled_only_for_their_author(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "alice", "secret plan for the launch", visibility="agent")
    core.add_memory("acme", "s", "alice", "public plan for the launch")
    assert len(core.recall("acme", "plan for the launch", viewer="alice").messages) == 2
    for viewer in ("bob", None):
        assert contents(core.recall("acme", "plan for the launch", viewer=viewer)) == ["public plan for the launch"]
        assert contents(core.recall("acme", "", viewer=viewer)) == ["public plan for the launch"]


@pytest.mark.slow
def test_no_recall_path_returns_another_tenants_rows(core: MemoryCore) -> None:
    for tenant in ("acme", "globex"):
        for i in range(6):
            core.add_memory(tenant, "s", "a", f"{tenant} turn {i}: the launch code is ZX-{i} for project orion")
    for query in ("launch code project orion", "ZX-3", "", "orion"):
        for opts in ({}, {"type": "turn"}, {"session": "s"}, {"deep": True}):
            res = core.recall("acme", query, limit=50, **opts)
            assert res.messages and all(m.tenant == "acme" and m.content.startswith("acme") for m in res.messages)
    assert core.recall("initech", "launch code project orion").messages == []


def test_recall_with_context_never_returns_what_the_context_holds(core: MemoryCore) -> None:
    held = core.add_memory("acme", "s", "a", "The staging database password rotates weekly.").ref
    core.add_memory("acme", "s", "a", "Staging database backups run nightly at 02:00.")
    ctx = [{"role": "user", "content": "The staging database password rotates weekly."}]
    res = core.recall_with_context("acme", "staging database", ctx)
    assert held not in {m.ref for m in res.messages} and res.messages
    with pytest.raises(MemoryCoreError):
        core.recall_with_context("acme", "x", [{"role": "user"}])


@pytest.mark.parametrize("limit", [0, 501, True, "3"])
def test_limit_beyond_the_scan_window_is_refused(core: MemoryCore, limit: object) -> None:
    with pytest.raises(MemoryCoreError) as err:
        core.recall("acme", "x", limit=limit)  # type: ignore[arg-type]
    assert err.value.code == "INVALID_INPUT"


def test_an_option_recall_does_not_know_is_refused_by_name(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "a", "The kiln fires on Thursday.")
    context = [{"role": "user", "content": "when does the kiln fire?"}]
    for recall in (lambda **o: core.recall("acme", "kiln", **o),  # type: ignore[arg-type]
                   lambda **o: core.recall_with_context("acme", "kiln", context, **o)):  # type: ignore[arg-type]
        with pytest.raises(MemoryCoreError) as err:
            recall(limitt=3, bogus=1)  # a typo must not silently change nothing
        assert err.value.code == "INVALID_INPUT"
        assert "'limitt'" in err.value.message and "'bogus'" in err.value.message
        assert "'limit'" in err.value.message  # the option it probably meant
        assert err.value.fields["field"] == "limitt"
        assert recall(limit=3).messages  # the known ones still work


def test_the_library_accepts_limits_up_to_the_scan_window(core: MemoryCore) -> None:
    core.add_memories([{"tenant": "acme", "session": "s", "agent": "a", "content": f"fact {i} about llamas"}
                       for i in range(120)])
    assert len(core.recall("acme", "", limit=500).messages) == 120
    assert len(core.recall("acme", "llamas fact", limit=100).messages) >= 51


def test_hostile_query_text_is_just_words(core: MemoryCore) -> None:
    core.add_memory("acme", "s", "a", 'NEAR AND OR "quoted" * col:value {$ne: 1}')
    for q in ['"unbalanced', "NEAR(a b)", "* OR *", "content:x", '{"$ne": ""}', "a\x00b", "\\%_"]:
        res = core.recall("acme", q, source_id="%_\\")
        assert res.messages == []
        core.recall("acme", q)
