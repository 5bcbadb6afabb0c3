"""Repeats collapsed in recall: one row per fact, the newest copy, with ``repeats`` and ``also``.

The pure step (:mod:`memory_core.recall.collapse`) first, then the library on every backend:
ranked, empty-query and gate-fallback recalls; ``collapse=False`` and ``deep``; private copies
and other tenants' copies never named in ``also``.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from mcp import Client
from typer.testing import CliRunner

from memory_core import MemoryCore
from memory_core.recall.collapse import Copy, collapse, fact_key
from memory_core.settings import load_settings
from memory_core.settings.schema import Settings
from testbed.mcp_in_process import served
from tests.support.backends import open_core
from tools.cli.app import app
from tools.mcp.preview import expand_rows

T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)
FLAGS = "Ledger-svc reads its feature flags from /etc/flags/ledger-svc.yaml."


# ---- the pure step ---------------------------------------------------------------------------
@pytest.mark.parametrize(("a", "b"), [
    (FLAGS, "ledger-svc reads its  feature flags from /etc/flags/ledger-svc.yaml"),
    ("Joanna: Thanks, Nate! Your support is greatly appreciated.", "Joanna: Thanks Nate! Your support is greatly "
                                                                  "appreciated."),
    ("**Deploys** freeze on Friday.", "Deploys freeze on Friday"),
    ("(see PROJ-12)", "see PROJ-12"),
])  # fmt: skip
def test_restatements_that_differ_in_case_space_or_word_edge_punctuation_are_one_fact(a: str, b: str) -> None:
    assert fact_key(a) == fact_key(b)


@pytest.mark.parametrize(("a", "b"), [
    ("Joanna: Bye Nate!", "Nate: Bye Joanna!"),  # the same words, another speaker (Jaccard 1.0 in LoCoMo)
    ("Fixed the PermissionError in validate_ledger", "Fixed the PermissionError in parse_ledger"),
    ("Bart saw his favorite elephants at the zoo.", "Bart saw his favorite penguins at the zoo."),
    ("The timeout is 3.5 s", "The timeout is 35 s"),
    ("The balance is -5", "The balance is 5"),
    ("flags in a.yaml", "flags in a-yaml"),
    ("Maria: the beach trip was lovely", "Maria: the beach trip was lovely?"),  # telling, asking
])  # fmt: skip
def test_near_identical_texts_that_say_different_things_stay_apart(a: str, b: str) -> None:
    assert fact_key(a) != fact_key(b)


def test_the_limit_counts_facts_and_each_shows_its_newest_copy_at_its_best_rank() -> None:
    texts = {1: "fact A", 2: "fact B", 3: "Fact A.", 4: "fact C", 5: "fact a", 6: "fact B"}
    ranked = [Copy(1, 10, "a"), Copy(2, 20, "b"), Copy(3, 30, "a2"), Copy(4, 5, "c"), Copy(5, 40, "a"),
              Copy(6, 15, "b")]
    reads: list[list[int]] = []

    def contents(ids: list[int]) -> dict[int, str]:
        reads.append(ids)
        return {i: texts[i] for i in ids}

    groups = collapse(ranked, 2, contents)
    assert [g.lead.id for g in groups] == [1, 2]
    assert [(g.shown.id, g.also) for g in groups] == [(5, [3, 1]), (2, [6])]
    assert all(2 not in ids and 5 not in ids and 6 not in ids for ids in reads[1:])  # only leaders are read
    assert [g.shown.id for g in collapse(ranked, 10, contents)] == [5, 2, 4]


def test_rows_without_a_content_hash_never_collapse() -> None:
    episodes = [Copy(1, 10, ""), Copy(2, 20, "")]
    groups = collapse(episodes, 5, lambda ids: {i: "the same summary" for i in ids})
    assert [len(g.members) for g in groups] == [1, 1]


# ---- through the library ------------------------------------------------------------------------
def restated(core: MemoryCore) -> list[str]:
    """FLAGS written in three sessions (exactly, lower-cased, without its period), plus other facts."""
    refs = []
    for day, text in enumerate((FLAGS, FLAGS.lower(), FLAGS.rstrip("."))):
        refs.append(core.add_memory("acme", f"s{day}", "alice" if day else "bob", text,
                                    timestamp=T0 + timedelta(days=day), type="note").ref)
        for i in range(3):
            core.add_memory("acme", f"s{day}", "alice", f"Feature flag {day}-{i}: ledger-svc flag number {i} is "
                            f"on in region {day}.", timestamp=T0 + timedelta(days=day, minutes=i + 1), type="note")
    return refs


def test_a_fact_restated_in_three_sessions_comes_back_once_as_its_newest_copy(core: MemoryCore) -> None:
    refs = restated(core)
    result = core.recall("acme", "where does ledger-svc read its feature flags from", limit=5)
    flags = [m for m in result.messages if "/etc/flags/ledger-svc.yaml" in m.content]
    assert len(flags) == 1
    row = flags[0]
    assert (row.ref, row.repeats, row.also) == (refs[2], 3, (refs[1], refs[0]))
    assert row.to_dict()["repeats"] == 3 and row.to_dict()["also"] == [refs[1], refs[0]]
    assert len(result.messages) == 5 and len({m.ref for m in result.messages}) == 5  # limit counts facts
    assert result.diagnostics["collapsed"] == 2
    assert all("repeats" not in m.to_dict() for m in result.messages if m is not row)


@pytest.mark.parametrize("option", [{"collapse": False}, {"deep": True}])
def test_collapse_false_or_deep_shows_every_copy(core: MemoryCore, option: dict[str, bool]) -> None:
    refs = restated(core)
    result = core.recall("acme", "where does ledger-svc read its feature flags from", limit=5, **option)
    assert set(refs) <= {m.ref for m in result.messages}
    assert all(m.repeats == 1 and m.also == () for m in result.messages)


def test_the_empty_query_lists_distinct_facts_newest_first(core: MemoryCore) -> None:
    for i in range(4):
        core.add_memory("acme", "s", "a", "Standup moved to 10:00.", timestamp=T0 + timedelta(hours=i))
    other = core.add_memory("acme", "s", "a", "The retro is on Thursday.", timestamp=T0 - timedelta(hours=1)).ref
    result = core.recall("acme", "", limit=2)
    assert [m.content for m in result.messages] == ["Standup moved to 10:00.", "The retro is on Thursday."]
    assert result.messages[0].repeats == 4 and result.messages[1].ref == other
    assert len(core.recall("acme", "", limit=2, collapse=False).messages) == 2


def test_another_agents_private_copy_is_never_named_and_the_authors_own_view_includes_it(core: MemoryCore) -> None:
    shared = core.add_memory("acme", "s1", "alice", FLAGS, timestamp=T0).ref
    secret = core.add_memory("acme", "s2", "bob", FLAGS, visibility="agent", timestamp=T0 + timedelta(days=1)).ref
    core.add_memory("globex", "s1", "alice", FLAGS, timestamp=T0 + timedelta(days=2))  # another tenant's copy
    query = "ledger-svc feature flags"
    for viewer in (None, "alice"):
        rows = core.recall("acme", query, viewer=viewer, limit=5).messages
        assert [(m.ref, m.repeats, m.also) for m in rows] == [(shared, 1, ())]
    rows = core.recall("acme", query, viewer="bob", limit=5).messages
    assert [(m.ref, m.repeats, m.also) for m in rows] == [(secret, 2, (shared,))]  # bob's own copy is newest


def test_copies_in_the_quality_gates_fallback_collapse_too(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest,
) -> None:
    core = open_core(backend, tmp_path / "d", request, recall={"quality_gate": 1.0})  # nothing passes the gate
    request.addfinalizer(core.close)
    for day in range(3):
        core.add_memory("acme", f"s{day}", "a", "zyxwv qwerty token", timestamp=T0 + timedelta(days=day))
    core.add_memory("acme", "s9", "a", "qwerty keyboards are common", timestamp=T0)
    result = core.recall("acme", "qwerty", limit=2)
    assert result.gate_fallback is True
    assert sorted(m.repeats for m in result.messages) == [1, 3]


# ---- through the MCP tools (preview tier) and the CLI -----------------------------------------------
@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def restated_store(tmp_path: Path) -> tuple[Path, Settings, list[str]]:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    data = tmp_path / "data"
    with MemoryCore.open(data, settings=settings) as core:
        refs = restated(core)
    return data, settings, refs


@pytest.mark.anyio
async def test_the_recall_tools_return_one_row_per_fact_with_its_repeats(tmp_path: Path) -> None:
    data, settings, refs = restated_store(tmp_path)
    query = {"tenant": "acme", "query": "where does ledger-svc read its feature flags from", "limit": 5}
    context = [{"role": "user", "content": "which config file?"}]
    async with Client(served(settings, str(data))) as client:
        for tool, extra in (("recall", {}), ("recall_with_context", {"context": context})):
            rows = expand_rows((await client.call_tool(tool, {**query, **extra})).structured_content or {})
            flags = [r for r in rows if "/etc/flags/" in r["content"]]
            assert [(r["ref"], r["repeats"], r["also"]) for r in flags] == [(refs[2], 3, [refs[1], refs[0]])], tool
            every = await client.call_tool(tool, {**query, **extra, "collapse": False})
            shown = {r["ref"] for r in expand_rows(every.structured_content or {})}
            assert set(refs) <= shown and not any("repeats" in r for r in expand_rows(every.structured_content or {}))


def test_cli_recall_marks_repeats_and_lists_every_copy_with_no_collapse(tmp_path: Path) -> None:
    data, _settings, refs = restated_store(tmp_path)
    args = ["recall", "ledger-svc feature flags file", "-t", "acme", "--data-dir", str(data), "-n", "5"]
    env = {"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}
    collapsed = CliRunner().invoke(app, [*args, "--json"], env=env)
    assert collapsed.exit_code == 0, collapsed.output
    flags = [m for m in json.loads(collapsed.stdout)["messages"] if "/etc/flags/" in m["content"]]
    assert [(m["ref"], m["repeats"], m["also"]) for m in flags] == [(refs[2], 3, [refs[1], refs[0]])]
    table = CliRunner().invoke(app, args, env=env)
    assert f"{refs[2]} ×3" in table.output
    every = CliRunner().invoke(app, [*args, "--no-collapse", "--json"], env=env)
    assert set(refs) <= {m["ref"] for m in json.loads(every.stdout)["messages"]}
