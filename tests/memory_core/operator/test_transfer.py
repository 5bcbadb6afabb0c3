"""Export / import of one tenant through memory_core.operator.transfer, on every vector backend."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import InvalidTenantError, LockedError, SupersededError, TenantRequiredError
from memory_core.operator.export_format import ExportLine
from memory_core.operator.jsonl_import import import_lines
from memory_core.operator.transfer import export_tenant
from tests.support.agreement import assert_stores_agree
from tests.support.backends import open_core

T0 = "2026-01-05T09:00:00.000000+00:00"


def populate(core: MemoryCore) -> None:
    """Two tenants; turns sharing a timestamp, a handoff chain, a private note, rich fields."""
    for i in range(6):
        core.add_memory("acme", "s1", "alice" if i % 2 else "bob", f"turn {i} about the apple harvest",
                        role="user" if i % 2 else "assistant", timestamp=T0 if i < 3 else None)
    core.create_handoff("acme", "s1", "bob", "first handoff: apples picked")
    core.create_handoff("acme", "s1", "bob", "second handoff: apples sold", idempotency_key="h2")
    core.add_memory("acme", "s2", "carol", "private scratch about pears", type="note", visibility="agent",
                    channel="cli", source={"id": "discord:42", "thread": 7}, project_id="orchard",
                    salience=0.7, metadata={"mood": "curious", "n": [1, 2]})
    core.add_memory("globex", "s1", "zed", "globex secret apple formula")


def lines_of(core: MemoryCore, tenant: str) -> list[dict]:
    return list(export_tenant(core.operator_parts(), tenant))


def as_jsonl(lines: list[dict]) -> list[str]:
    return [json.dumps(line) + "\n" for line in lines]


@pytest.fixture
def second(backend: str, tmp_path: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    other = open_core(backend, tmp_path / "other", request)
    yield other
    other.close()


@pytest.mark.slow
def test_export_lines_hold_every_field_needed_to_rebuild_a_memory(core: MemoryCore) -> None:
    populate(core)
    lines = lines_of(core, "acme")
    assert len(lines) == 9
    assert [ExportLine.model_validate(line).model_dump(mode="json") for line in lines] == lines
    note = next(line for line in lines if line["type"] == "note")
    assert note["visibility"] == "agent"
    assert note["source"] == {"id": "discord:42", "thread": 7}
    assert note["metadata"] == {"mood": "curious", "n": [1, 2]}
    assert (note["project_id"], note["channel"], note["salience"]) == ("orchard", "cli", 0.7)
    second_handoff = next(line for line in lines if line["content"].startswith("second handoff"))
    first_handoff = next(line for line in lines if line["content"].startswith("first handoff"))
    assert second_handoff["idempotency_key"] == "h2"
    assert {"kind": "SUPERSEDES", "node": first_handoff["ref"]} in second_handoff["edges"]
    assert [line["timestamp"] for line in lines] == sorted(line["timestamp"] for line in lines)


def test_an_export_never_contains_another_tenants_rows(core: MemoryCore) -> None:
    populate(core)
    assert {line["tenant"] for line in lines_of(core, "acme")} == {"acme"}
    globex = lines_of(core, "globex")
    assert [line["content"] for line in globex] == ["globex secret apple formula"]
    assert lines_of(core, "nobody") == []


@pytest.mark.parametrize("tenant", [None, "", "  ", "*", "acme/../globex"])
def test_an_export_requires_one_valid_tenant(core: MemoryCore, tenant: object) -> None:
    with pytest.raises((TenantRequiredError, InvalidTenantError)):
        lines_of(core, tenant)  # type: ignore[arg-type]


@pytest.mark.slow
def test_import_into_an_empty_store_gives_identical_recall_and_recent_turn_pages(
    core: MemoryCore, second: MemoryCore
) -> None:
    populate(core)
    counts = import_lines(second.operator_parts(), as_jsonl(lines_of(core, "acme")), "acme")
    assert (counts.written, counts.skipped, counts.remapped, counts.errors) == (9, 0, 0, 0)
    assert counts.edges == 1  # the SUPERSEDES link between the two handoffs
    assert lines_of(second, "acme") == lines_of(core, "acme")
    for query, options in [("apple harvest", {}), ("handoff", {"type": "handoff"}), ("", {"limit": 5}),
                           ("pears", {"viewer": "carol"}), ("apples", {"project_id": "orchard", "deep": True})]:
        want = core.recall("acme", query, **options).messages
        got = second.recall("acme", query, **options).messages
        assert [m.ref for m in got] == [m.ref for m in want], query
        assert [m.content for m in got] == [m.content for m in want]
    for store in (core, second):
        refs, cursor = [], None
        while True:
            page = store.query_recent_turns("acme", "s1", limit=2, cursor=cursor)
            refs.append([t.ref for t in page.turns])
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        if store is core:
            original = refs
    assert refs == original
    assert second.check_memory("acme", lines_of(core, "acme")[7]["ref"]).neighbours["edges"]
    assert lines_of(second, "globex") == []
    assert_stores_agree(second)


@pytest.mark.slow
def test_reimporting_the_same_file_writes_nothing_new(core: MemoryCore, second: MemoryCore) -> None:
    populate(core)
    file = as_jsonl(lines_of(core, "acme"))
    import_lines(second.operator_parts(), file, "acme")
    before = lines_of(second, "acme")
    again = import_lines(second.operator_parts(), file, "acme")
    assert (again.written, again.skipped, again.errors) == (0, 9, 0)
    assert lines_of(second, "acme") == before
    again = import_lines(core.operator_parts(), file, "acme")  # into the store it came from
    assert (again.written, again.skipped) == (0, 9)


@pytest.mark.slow
def test_rows_whose_ids_are_taken_get_new_refs_and_still_import_once(core: MemoryCore, second: MemoryCore) -> None:
    populate(core)
    for i in range(4):  # occupy ids 1..4 in the target with another tenant's rows
        second.add_memory("initech", "s", "x", f"unrelated row {i}")
    file = as_jsonl(lines_of(core, "acme"))
    counts = import_lines(second.operator_parts(), file, "acme")
    assert (counts.written, counts.remapped) == (9, 4)
    assert sorted(line["content"] for line in lines_of(second, "acme")) == sorted(
        line["content"] for line in lines_of(core, "acme"))
    handoffs = [line for line in lines_of(second, "acme") if line["type"] == "handoff"]
    assert {"kind": "SUPERSEDES", "node": handoffs[0]["ref"]} in handoffs[1]["edges"]
    again = import_lines(second.operator_parts(), file, "acme")
    assert (again.written, again.skipped) == (0, 9)
    assert second._graph.count("acme") == 9


@pytest.mark.slow
def test_import_refuses_lines_of_another_tenant_and_malformed_lines_without_writing_them(
    core: MemoryCore, second: MemoryCore
) -> None:
    populate(core)
    good = lines_of(core, "acme")[0]
    tampered = {**good, "content": "edited by hand"}
    lines = [
        *as_jsonl(lines_of(core, "globex")),
        "{not json\n",
        json.dumps({**good, "surprise": 1}) + "\n",
        json.dumps(tampered) + "\n",
        json.dumps({**good, "type": "Not A Type"}) + "\n",
        "\n",
        json.dumps(good) + "\n",
    ]
    # by default the import stops at the first refused line
    stopped = import_lines(second.operator_parts(), lines, "acme")
    assert (stopped.lines, stopped.written, stopped.errors, stopped.stopped_at) == (1, 0, 1, 1)
    counts = import_lines(second.operator_parts(), lines, "acme", skip_bad=True)
    assert (counts.lines, counts.written, counts.errors, counts.stopped_at) == (6, 1, 5, None)
    assert [e["code"] for e in counts.error_lines] == [
        "TENANT_MISMATCH", "INVALID_INPUT", "INVALID_INPUT", "INVALID_INPUT", "INVALID_INPUT"]
    assert [e["line"] for e in counts.error_lines] == [1, 2, 3, 4, 5]
    assert lines_of(second, "globex") == []
    assert [line["content"] for line in lines_of(second, "acme")] == [good["content"]]
    with pytest.raises(TenantRequiredError):
        import_lines(second.operator_parts(), as_jsonl([good]), "")


def _versioned(core: MemoryCore) -> dict[str, str]:
    """A chain of three versions (the head locked), a locked single memory, a private chain."""
    v1 = core.add_memory("acme", "s9", "ann", "the port is 8080", type="fact").ref
    v2 = core.update_memory("acme", v1, content="the port is 8443").added.ref
    v3 = core.update_memory("acme", v2, content="the port is 9443", agent="bob").added.ref
    core.lock_memory("acme", v3)
    solo = core.add_memory("acme", "s9", "ann", "never delete this", type="decision").ref
    core.lock_memory("acme", solo)
    p1 = core.add_memory("acme", "s9", "ann", "my draft", type="note", visibility="agent").ref
    p2 = core.update_memory("acme", p1, content="my better draft", agent="ann").added.ref
    return {"v1": v1, "v2": v2, "v3": v3, "solo": solo, "p1": p1, "p2": p2}


def test_export_and_import_carry_version_chains_their_ends_and_locks(core: MemoryCore, second: MemoryCore) -> None:
    refs = _versioned(core)
    lines = {line["ref"]: line for line in lines_of(core, "acme")}
    assert lines[refs["v2"]]["supersedes"] == refs["v1"] and lines[refs["v1"]]["superseded"] is True
    assert lines[refs["v3"]]["locked"] is True and lines[refs["v3"]]["valid_to"] is None
    counts = import_lines(second.operator_parts(), as_jsonl(list(lines.values())), "acme")
    assert (counts.written, counts.states, counts.errors) == (6, 6, 0)
    assert lines_of(second, "acme") == lines_of(core, "acme")
    assert [r.ref for r in second.history("acme", refs["v1"])] == [refs["v1"], refs["v2"], refs["v3"]]
    assert [r.ref for r in second.recall("acme", "port").messages] == [refs["v3"]]
    with pytest.raises(LockedError):
        second.update_memory("acme", refs["v3"], content="the port is 1")
    with pytest.raises(SupersededError):
        second.update_memory("acme", refs["v1"], content="the port is 2")
    assert [r.ref for r in second.history("acme", refs["p2"], viewer="ann")] == [refs["p1"], refs["p2"]]
    assert_stores_agree(second)


@pytest.mark.slow
def test_reimporting_versions_writes_nothing_new_even_under_new_refs(core: MemoryCore, second: MemoryCore) -> None:
    refs = _versioned(core)
    for i in range(3):  # occupy ids so the chain is remapped: links follow the new refs
        second.add_memory("initech", "s", "x", f"unrelated row {i}")
    file = as_jsonl(lines_of(core, "acme"))
    first = import_lines(second.operator_parts(), file, "acme")
    assert first.remapped == 3 and first.states == 6
    mapped = first.refs
    chain = second.history("acme", mapped[refs["v3"]])
    assert [r.ref for r in chain] == [mapped[refs["v1"]], mapped[refs["v2"]], mapped[refs["v3"]]]
    again = import_lines(second.operator_parts(), file, "acme")
    assert (again.written, again.states, again.skipped) == (0, 0, 6)
    again = import_lines(core.operator_parts(), file, "acme")  # into the store it came from
    assert (again.written, again.states) == (0, 0)


def test_export_and_import_carry_validity_ends_and_reviews(core: MemoryCore, second: MemoryCore) -> None:
    ended = core.add_memory("acme", "s", "ann", "The canary fleet is cf-2", type="fact",
                            valid_from="2026-01-01T00:00:00+00:00").ref
    core.end_memory("acme", ended, "the canary fleet was retired", agent="bob")
    review = core.add_memory("acme", "s", "ann", "The deploy freeze holds", type="fact",
                             review_after="2026-02-01T00:00:00+00:00").ref
    lines = {line["ref"]: line for line in lines_of(core, "acme")}
    assert lines[ended]["ended"] == {"reason": "the canary fleet was retired", "by": "bob"}
    assert lines[ended]["valid_from"].startswith("2026-01-01") and lines[ended]["superseded"] is False
    assert lines[review]["review_after"].startswith("2026-02-01") and "review_due" not in lines[review]
    counts = import_lines(second.operator_parts(), as_jsonl(list(lines.values())), "acme")
    assert counts.errors == 0
    assert lines_of(second, "acme") == lines_of(core, "acme")
    assert second.history("acme", ended)[0].ended == {"reason": "the canary fleet was retired", "by": "bob"}
    assert ended not in [r.ref for r in second.recall("acme", "canary fleet").messages]
    assert second.revive_memory("acme", ended).changed
