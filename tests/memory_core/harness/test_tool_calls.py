"""A tool call in one capped line: the argument that matters and the outcome, never the contents."""

from __future__ import annotations

from memory_core.harness.tool_calls import describe
from memory_core.harness.transcript import ToolResult, ToolUse


def use(name: str, **arguments: object) -> ToolUse:
    return ToolUse("line-1", "toolu_1", name, dict(arguments), "2026-12-06T10:00:00Z")


def result(text: str, *, error: bool = False, size: int | None = None) -> ToolResult:
    return ToolResult("toolu_1", error, text[:2000], len(text) if size is None else size, None)


def test_a_failed_command_keeps_its_first_and_last_lines() -> None:
    output = "Exit code 1\n" + "\n".join(f"tests/test_{i}.py ." for i in range(300)) + "\nFAILED tests/test_api.py::t"
    call = describe(use("Bash", command="pytest -x"), result(output, error=True))
    assert call.outcome == "error"
    assert call.detail.startswith("Exit code 1 … ") or call.detail.startswith("Exit code 1")
    assert call.text().startswith("Bash `pytest -x` → error: Exit code 1")
    assert "chars of output" in call.text()


def test_a_write_keeps_the_path_and_never_the_contents() -> None:
    call = describe(use("Write", file_path="/w/secret_plan.md", content="TOP SECRET " * 1000), result("ok"))
    assert call.target == "/w/secret_plan.md"
    assert "TOP SECRET" not in call.text() and "TOP SECRET" not in str(call.metadata())


def test_an_edit_keeps_the_path_and_never_the_strings() -> None:
    call = describe(use("Edit", file_path="/w/a.py", old_string="password = 'x'", new_string="y"), result("ok"))
    assert call.text() == "Edit `/w/a.py` → ok" and "password" not in str(call.metadata())


def test_a_read_says_how_much_came_back_not_what() -> None:
    content = "\n".join(f"line {i}: private" for i in range(5000))
    call = describe(use("Read", file_path="/w/big.txt"), result(content))
    assert "private" not in call.text() and "lines" in call.detail


def test_a_long_multi_line_command_is_capped_to_its_first_line() -> None:
    call = describe(use("Bash", command="python - <<'EOF'\nimport os\n" + "x" * 500 + "\nEOF"), result("done"))
    assert call.target == "python - <<'EOF' …"
    long = describe(use("Bash", command="echo " + "z" * 1000), result(""), target_chars=100)
    assert len(long.target) == 100 and long.target.endswith("…")


def test_web_calls_carry_web_provenance_and_others_tool() -> None:
    assert describe(use("WebFetch", url="https://example.org/x", prompt="p"), result("page")).provenance == "web"
    assert describe(use("WebSearch", query="pytest"), result("r")).metadata()["provenance"] == "web"
    assert describe(use("Grep", pattern="def main", path="src"), result("a\nb")).metadata()["provenance"] == "tool"


def test_a_call_without_result_says_so() -> None:
    call = describe(use("Bash", command="sleep 100"), None)
    assert call.outcome == "no result" and call.text() == "Bash `sleep 100` → no result"


def test_task_tools_leave_their_tasks() -> None:
    todo = describe(use("TodoWrite", todos=[{"content": "write tests", "status": "in_progress"},
                                           {"content": "ship", "status": "pending"}]), result("ok"))
    assert todo.snapshot and [t.text for t in todo.tasks] == ["write tests", "ship"]
    created = describe(use("TaskCreate", subject="fix the login bug"), result("Task #4 created successfully"))
    assert created.tasks[0].id == "4" and created.tasks[0].status == "pending"
    updated = describe(use("TaskUpdate", taskId="4", status="completed"), result("Updated task #4"))
    assert updated.tasks[0].status == "completed" and updated.target == "#4 completed"


def test_an_mcp_tool_keeps_a_short_argument() -> None:
    call = describe(use("mcp__memory-core__recall", query="login bug", limit=5), result("{}"))
    assert call.target == "login bug"
