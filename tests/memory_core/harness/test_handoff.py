"""The handoff built without a model: every line from a stored row; a model's version fail-soft."""

from __future__ import annotations

from typing import Any

from memory_core.harness.handoff import build_handoff, polish
from memory_core.harness.store import StoredRow
from memory_core.provider.errors import ProviderError


def turn(n: int, role: str, content: str, **metadata: Any) -> StoredRow:
    return StoredRow(ref=f"mem:{n}", content=content, role=role, metadata=metadata)


def tool(n: int, name: str, target: str, outcome: str, content: str = "", **extra: Any) -> StoredRow:
    return turn(n, "tool", content or f"{name} `{target}` → {outcome}", tool=name, target=target, outcome=outcome,
                provenance="tool", **extra)


SESSION = [  # oldest first
    turn(1, "user", "Add pagination to the list endpoint. Always use opaque cursors, never offsets."),
    turn(2, "assistant", "I will read the handler first."),
    tool(3, "Read", "/w/api/handlers.py", "ok"),
    tool(4, "TodoWrite", "2 tasks", "ok", tasks=[{"text": "add cursor param", "status": "in_progress"},
                                                  {"text": "write tests", "status": "pending"}], task_list=True),
    tool(5, "Edit", "/w/api/handlers.py", "ok"),
    tool(6, "Bash", "pytest tests/test_api.py", "error", "Bash `pytest tests/test_api.py` → error: 1 failed"),
    turn(7, "assistant", "We decided to encode the cursor as base64 JSON rather than a raw id."),
    tool(8, "Bash", "ruff check .", "error", "Bash `ruff check .` → error: E501"),
    tool(9, "Bash", "ruff check .", "ok"),
    turn(10, "user", "Now also document the cursor format in docs/api.md"),
    turn(11, "assistant", "Documenting it next; the failing test is still open."),
]


def test_the_handoff_says_where_the_session_stands() -> None:
    draft = build_handoff(list(reversed(SESSION)), session="s1")
    assert draft is not None
    text = draft.text
    assert "Last request [mem:10]: Now also document the cursor format in docs/api.md" in text
    assert "Where it stopped [mem:11]" in text
    assert "- add cursor param (in_progress)" in text and "- write tests" in text
    assert "opaque cursors, never offsets" in text and "base64 JSON rather than a raw id" in text
    assert "Files edited: /w/api/handlers.py" in text
    assert "pytest tests/test_api.py" in text  # failed, never fixed
    assert "E501" not in text  # ruff failed, then passed
    assert draft.covers == "mem:11" and draft.last_request is not None


def test_nothing_captured_makes_no_handoff() -> None:
    assert build_handoff([], session="s") is None


def test_task_changes_after_a_snapshot_update_the_open_list() -> None:
    rows = [tool(1, "TaskCreate", "a", "ok", tasks=[{"text": "migrate db", "status": "pending", "id": "1"}]),
            tool(2, "TaskCreate", "b", "ok", tasks=[{"text": "deploy", "status": "pending", "id": "2"}]),
            tool(3, "TaskUpdate", "#1 completed", "ok", tasks=[{"text": "", "status": "completed", "id": "1"}])]
    text = build_handoff(list(reversed(rows)), session="s")
    assert text is not None and "- deploy" in text.text and "migrate db" not in text.text


class FakeClient:
    def __init__(self, answer: str | None = None, fail: str | None = None) -> None:
        self.answer, self.fail, self.asked = answer, fail, 0

    def complete(self, messages: list[dict[str, str]], *, max_tokens: int, parse: Any) -> str:
        self.asked += 1
        if self.fail:
            raise ProviderError(self.fail, transient=True)
        return str(parse(self.answer))


def test_a_model_rewrites_the_draft_when_one_is_set() -> None:
    draft = build_handoff(list(reversed(SESSION)), session="s1")
    assert draft is not None
    done = polish(draft, FakeClient("Tighter handoff [mem:10]."))  # type: ignore[arg-type]
    assert done.source == "model" and "Tighter handoff [mem:10]." in done.text and done.error is None


def test_a_failing_slow_or_absent_model_leaves_the_draft_and_says_why() -> None:
    draft = build_handoff(list(reversed(SESSION)), session="s1")
    assert draft is not None
    assert polish(draft, None).error == "provider disabled"
    timed_out = polish(draft, FakeClient(fail="timeout after 2s"))  # type: ignore[arg-type]
    assert timed_out.text == draft.text and timed_out.source == "hook" and timed_out.error == "timeout after 2s"
    empty = polish(draft, FakeClient("   "))  # type: ignore[arg-type]
    assert empty.text == draft.text and empty.error == "empty response"
