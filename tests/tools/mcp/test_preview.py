"""The preview tier as a pure function of library rows (no stores, no server)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memory_core.models import CheckResult, Contents, MemoryRow, RecallResult, RecentTurnsPage
from memory_core.sessions.episodes import Recovery
from tools.mcp.preview import PreviewShaper, expand_rows


def make_row(mem_id: int, content: str, **extra: Any) -> MemoryRow:
    fields: dict[str, Any] = {
        "ref": f"mem:{mem_id}",
        "id": mem_id,
        "tenant": "acme",
        "session": "s1",
        "agent": "alice",
        "content": content,
        "type": "turn",
        "role": "user",
        "channel": None,
        "source": {"id": "discord:1"},
        "project_id": None,
        "salience": 0.5,
        "visibility": "tenant",
        "timestamp": datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        "metadata": {},
        "content_len": len(content),
        "content_hash": "x",
    }
    fields.update(extra)
    return MemoryRow(**fields)


def test_short_rows_carry_no_markers() -> None:
    shaped = PreviewShaper(preview_chars=10).preview_row(make_row(1, "short"))
    assert shaped["content"] == "short"
    assert "content_truncated" not in shaped
    assert "content_len" not in shaped


def test_a_row_exactly_at_the_cap_is_not_trimmed() -> None:
    shaped = PreviewShaper(preview_chars=5).preview_row(make_row(1, "12345"))
    assert shaped["content"] == "12345"
    assert "content_truncated" not in shaped


def test_long_rows_are_a_pure_prefix_with_both_markers() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 30
    shaped = PreviewShaper(preview_chars=500).preview_row(make_row(7, text))
    assert shaped["content"] == text[:494]  # the last whole sentence within 500 characters
    assert text.startswith(shaped["content"])
    assert shaped["content_truncated"] is True
    assert shaped["content_len"] == len(text)
    assert shaped["ref"] == "mem:7"


def test_zero_preview_chars_disables_trimming() -> None:
    text = "x" * 5000
    shaped = PreviewShaper(preview_chars=0).preview_row(make_row(1, text))
    assert shaped["content"] == text
    assert "content_truncated" not in shaped


def test_rows_keep_the_spec_fields_and_drop_nulls_the_tenant_and_defaults() -> None:
    row = make_row(3, "hello", confidence=0.87654, match_reason={"signal": "rrf", "score": 0.1})
    shaped = PreviewShaper().preview_row(row)
    for key in ("ref", "session", "agent", "source", "timestamp", "confidence", "match_reason"):
        assert key in shaped
    assert shaped["timestamp"] == "2026-01-02T03:04Z"  # minutes are enough for agents
    for key in ("channel", "tenant", "salience", "visibility", "metadata", "type"):
        assert key not in shaped  # type: 'turn' is the default, stated in the tool descriptions


def test_previews_end_at_a_sentence_or_word_end_in_their_last_fifth() -> None:
    shaper = PreviewShaper(preview_chars=100)
    sentence = "a" * 85 + ". " + "b" * 200
    assert shaper.trim(sentence)["content"] == "a" * 85 + "."
    words = "word " * 60
    cut = shaper.trim(words)["content"]
    assert words.startswith(cut) and cut.endswith("word") and 80 <= len(cut) <= 100
    solid = "x" * 300
    assert shaper.trim(solid)["content"] == "x" * 100  # no boundary: the hard limit


def test_empty_source_is_left_out_and_a_set_one_kept() -> None:
    assert "source" not in PreviewShaper().preview_row(make_row(1, "x", source={}))
    assert PreviewShaper().preview_row(make_row(1, "x"))["source"] == {"id": "discord:1"}


def test_match_reason_does_not_repeat_the_confidence() -> None:
    reason = {"signal": "confidence", "score": 0.8123, "cosine": 0.5}
    shaped = PreviewShaper().preview_row(make_row(1, "x", confidence=0.8123, match_reason=reason))
    assert shaped["confidence"] == 0.812 and shaped["match_reason"] == {"signal": "confidence", "cosine": 0.5}
    other = {"signal": "cosine", "score": 0.5, "cosine": 0.5}
    shaped = PreviewShaper().preview_row(make_row(1, "x", confidence=0.7, match_reason=other))
    assert shaped["match_reason"] == {"signal": "cosine", "score": 0.5, "cosine": 0.5}


def test_a_recall_names_the_session_and_agent_its_rows_share_once() -> None:
    rows = [make_row(i, "x", agent="alice", session="s1" if i < 3 else "s2") for i in range(1, 4)]
    shaped = PreviewShaper().recall(RecallResult(messages=rows))
    assert shaped["shared"] == {"agent": "alice"}
    assert all("agent" not in m and "session" in m for m in shaped["messages"])
    single = PreviewShaper().recall(RecallResult(messages=rows[:1]))
    assert "shared" not in single and single["messages"][0]["agent"] == "alice"


def test_non_default_salience_visibility_and_metadata_are_kept() -> None:
    row = make_row(3, "hi", salience=0.95, visibility="agent", metadata={"k": 1})
    shaped = PreviewShaper().preview_row(row)
    assert (shaped["salience"], shaped["visibility"], shaped["metadata"]) == (0.95, "agent", {"k": 1})


def test_scores_are_rounded_and_silent_retrievers_left_out_of_match_reason() -> None:
    reason = {"signal": "confidence", "score": 0.77081, "rsf": 0.0, "cosine": 0.43981, "bm25": 0.0}
    shaped = PreviewShaper().preview_row(make_row(1, "x", confidence=0.77081, match_reason=reason))
    assert shaped["confidence"] == 0.771
    assert shaped["match_reason"] == {"signal": "confidence", "cosine": 0.44}


def test_full_content_keeps_every_row_whole_within_the_budget() -> None:
    rows = [make_row(i, "y" * 1000) for i in range(1, 4)]
    messages, degraded = PreviewShaper(preview_chars=100, full_content_budget_chars=3000).messages(
        rows, full_content=True
    )
    assert not degraded
    assert all(m["content"] == "y" * 1000 and "content_truncated" not in m for m in messages)


def test_full_content_past_the_budget_degrades_the_least_relevant_rows_first() -> None:
    rows = [make_row(i, str(i) * 1000) for i in range(1, 5)]
    shaper = PreviewShaper(preview_chars=100, full_content_budget_chars=2500)
    response = shaper.recall(RecallResult(messages=rows), full_content=True)
    whole = [m["ref"] for m in response["messages"] if "content_truncated" not in m]
    trimmed = [m for m in response["messages"] if m.get("content_truncated")]
    assert whole == ["mem:1", "mem:2"]
    assert [m["ref"] for m in trimmed] == ["mem:3", "mem:4"]
    assert all(len(m["content"]) == 100 and m["content_len"] == 1000 for m in trimmed)
    assert response["full_content_budget_chars"] == 2500


def test_an_oversized_top_row_degrades_without_starving_the_rows_after_it() -> None:
    rows = [make_row(1, "a" * 5000), make_row(2, "b" * 200)]
    messages, degraded = PreviewShaper(preview_chars=50, full_content_budget_chars=1000).messages(
        rows, full_content=True
    )
    assert degraded
    assert messages[0]["content_truncated"] is True
    assert messages[1]["content"] == "b" * 200


def test_the_budget_marker_is_absent_when_nothing_degraded() -> None:
    response = PreviewShaper().recall(RecallResult(messages=[make_row(1, "a" * 900)]), full_content=True)
    assert "full_content_budget_chars" not in response
    assert response["messages"][0]["content"] == "a" * 900


def test_gate_fallback_appears_only_when_true() -> None:
    shaper = PreviewShaper()
    assert "gate_fallback" not in shaper.recall(RecallResult(messages=[]))
    assert shaper.recall(RecallResult(messages=[], gate_fallback=True))["gate_fallback"] is True


def test_resolved_project_and_warning_are_echoed() -> None:
    result = RecallResult(messages=[], resolved_project_id="@auto", operating_context_warning="no mapping")
    response = PreviewShaper().recall(result)
    assert response["resolved_project_id"] == "@auto"
    assert response["warning"] == "no mapping"  # the key memory-core recall --json uses too


def test_context_entries_are_trimmed_the_same_way_and_carry_no_ref() -> None:
    long = "z" * 700
    context = [{"role": "user", "content": long}, {"role": "assistant", "content": "ok"}]
    response = PreviewShaper(preview_chars=500).recall(RecallResult(messages=[]), context=context)
    first, second = response["context"]
    assert first == {"role": "user", "content": long[:500], "content_truncated": True, "content_len": 700}
    assert second == {"role": "assistant", "content": "ok"}


def test_recent_turns_are_previews_with_the_cursor() -> None:
    page = RecentTurnsPage(turns=[make_row(2, "q" * 600), make_row(1, "hi")], next_cursor="abc.def")
    shaped = PreviewShaper(preview_chars=500).recent_turns(page)
    assert shaped["next_cursor"] == "abc.def"
    assert shaped["turns"][0]["content_truncated"] is True
    assert "content_truncated" not in shaped["turns"][1]
    assert all("session" not in t and "type" not in t for t in shaped["turns"])


def test_get_contents_rows_are_whole_and_missing_refs_are_listed() -> None:
    contents = Contents(found=[make_row(1, "w" * 50)], missing=["mem:x"])
    shaped = PreviewShaper(preview_chars=10).contents(contents)
    assert shaped["found"][0]["content"] == "w" * 50
    assert "content_truncated" not in shaped["found"][0]
    assert shaped["missing"] == ["mem:x"]


def test_check_memory_is_whole_and_its_neighbour_rows_are_previews() -> None:
    result = CheckResult(
        memory=make_row(5, "m" * 900),
        neighbours={"previous": make_row(4, "p" * 900), "next": None, "edges": [{"kind": "FOLLOWS"}]},
    )
    shaped = PreviewShaper(preview_chars=100).check(result)
    assert shaped["memory"]["content"] == "m" * 900
    assert shaped["neighbours"]["previous"]["content"] == "p" * 100
    assert shaped["neighbours"]["previous"]["content_truncated"] is True
    assert shaped["neighbours"]["edges"] == [{"kind": "FOLLOWS"}]


def test_recovery_keeps_the_handoff_whole_and_the_turns_as_previews() -> None:
    page = RecentTurnsPage(turns=[make_row(3, "t" * 800)], next_cursor="c.d")
    recovery = Recovery(handoff=make_row(4, "h" * 900, type="handoff"), episode=None, turns=page)
    shaped = PreviewShaper(preview_chars=500, recover_turn_chars=100).recovery(recovery)
    assert shaped["handoff"]["content"] == "h" * 900
    assert shaped["summary"] is None
    assert shaped["turns"][0]["content"] == "t" * 100 and shaped["turns"][0]["content_len"] == 800
    assert shaped["next_cursor"] == "c.d"


def test_fused_scores_stay_in_match_reason_only_when_they_are_the_signal() -> None:
    ranked = {"signal": "confidence", "score": 0.8, "rsf": 0.9, "rrf": 0.03, "cosine": 0.5, "bm25": 4.2}
    shaped = PreviewShaper().preview_row(make_row(1, "x", confidence=0.8, match_reason=ranked))
    assert shaped["match_reason"] == {"signal": "confidence", "cosine": 0.5, "bm25": 4.2}
    by_rrf = {"signal": "rrf", "score": 0.03, "rrf": 0.03, "cosine": 0.5}
    shaped = PreviewShaper().preview_row(make_row(2, "x", confidence=0.03, match_reason=by_rrf))
    assert shaped["match_reason"] == {"signal": "rrf", "rrf": 0.03, "cosine": 0.5}


def test_expanded_rows_put_back_what_the_shaping_left_out() -> None:
    rows = [make_row(i, "x", agent="alice") for i in range(1, 3)] + [make_row(3, "y", agent="alice", type="note")]
    expanded = expand_rows(PreviewShaper().recall(RecallResult(messages=rows)))
    assert [(r["agent"], r["session"], r["type"]) for r in expanded] == [("alice", "s1", "turn")] * 2 + [
        ("alice", "s1", "note")
    ]


def test_a_signal_every_row_shares_is_stated_once_and_put_back_on_expansion() -> None:
    reason = {"signal": "confidence", "score": 0.9, "cosine": 0.5}
    rows = [make_row(i, "x", confidence=0.9, match_reason=dict(reason)) for i in range(1, 3)]
    shaped = PreviewShaper().recall(RecallResult(messages=rows))
    assert shaped["shared"]["signal"] == "confidence"
    assert all("signal" not in m["match_reason"] for m in shaped["messages"])
    assert [r["match_reason"]["signal"] for r in expand_rows(shaped)] == ["confidence", "confidence"]
    mixed = [make_row(1, "x", confidence=0.9, match_reason=dict(reason)),
             make_row(2, "x", confidence=0.2, match_reason={"signal": "rrf", "rrf": 0.03})]  # fmt: skip
    shaped = PreviewShaper().recall(RecallResult(messages=mixed))
    assert "signal" not in shaped.get("shared", {})
    assert [m["match_reason"]["signal"] for m in shaped["messages"]] == ["confidence", "rrf"]
