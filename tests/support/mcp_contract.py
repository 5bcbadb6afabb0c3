"""The MCP tool contract, run over every transport.

``ToolContract`` holds the behaviour every transport must show; a test module subclasses
it as ``Test<Transport>`` and provides two fixtures: ``acme`` and ``beta``, a ``Caller``
for each of two tenants on one running server. Each test writes into its own sessions
and searches for its own words, so the tests can share one server.
"""

from __future__ import annotations

from typing import Any

import pytest

from testbed.mcp_harness import TEST_BUDGET_CHARS, Caller, error_code
from tools.mcp.preview import preview_end
from tools.registry import TOOL_SPECS

TOOLS_NOW = {
    "add_memory",
    "recall",
    "recall_with_context",
    "get_contents",
    "query_recent_turns",
    "check_memory",
    "related",
    "create_handoff",
    "delete_memory",
    "recover_context",
    "summarize_session",
    "update_memory",
    "lock_memory",
    "unlock_memory",
}
PREVIEW_CHARS = 500
# The smallest valid call of each tool (tenant aside: a Caller adds it), for probes that add one argument.
VALID_CALLS: dict[str, dict[str, Any]] = {
    "add_memory": {"session": "strict", "agent": "a", "content": "strict typing probe"},
    "recall": {"query": "strict"},
    "recall_with_context": {"query": "strict", "context": [{"role": "user", "content": "hi"}]},
    "get_contents": {"refs": ["mem:1"]},
    "query_recent_turns": {"session": "strict"},
    "check_memory": {"ref": "mem:1"},
    "related": {"entity": "strict"},
    "create_handoff": {"session": "strict", "agent": "a", "content": "strict handoff probe"},
    "delete_memory": {"ref": "mem:999999"},
    "recover_context": {"session": "strict"},
    "summarize_session": {"session": "strict"},
    "update_memory": {"ref": "mem:999999", "agent": "a", "content": "strict update probe"},
    "lock_memory": {"ref": "mem:999999"},
    "unlock_memory": {"ref": "mem:999999"},
}


async def refuses_unknown_arguments(caller: Caller) -> set[str]:
    """Every tool of the registry called with one argument it does not take: INVALID_INPUT naming it."""
    probed: set[str] = set()
    for spec in TOOL_SPECS:
        result = await caller.call(spec.name, **{**VALID_CALLS[spec.name], "no_such_argument": "agent"})
        assert error_code(result) == "INVALID_INPUT", (spec.name, result.content)
        assert "'no_such_argument'" in result.content[0].text, result.content  # type: ignore[union-attr]
        assert result.structured_content is not None
        assert result.structured_content["error"]["field"] == "no_such_argument"
        probed.add(spec.name)
    return probed


def long_text(keyword: str, chars: int) -> str:
    """A text of exactly ``chars`` characters that starts with ``keyword``."""
    body = f"{keyword} " + " ".join(f"{keyword}{i} detail" for i in range(chars))
    return body[:chars]


def refs_of(response: dict[str, Any]) -> list[str]:
    return [message["ref"] for message in response["messages"]]


@pytest.mark.anyio
class ToolContract:
    async def test_the_tool_list_names_every_tool_and_its_schemas_state_the_caps(self, acme: Caller) -> None:
        tools = {tool.name: tool for tool in (await acme.client.list_tools()).tools}
        assert set(tools) >= TOOLS_NOW
        recall_limit = tools["recall"].input_schema["properties"]["limit"]
        assert (recall_limit["maximum"], recall_limit["default"]) == (50, 10)
        assert tools["get_contents"].input_schema["properties"]["refs"]["maxItems"] == 20
        assert tools["query_recent_turns"].input_schema["properties"]["limit"]["maximum"] == 100
        for tool in tools.values():
            assert tool.description and len(tool.description) < 1200
            if acme.send_tenant:  # no binding: every call names its tenant, so the schema requires it
                assert "tenant" in tool.input_schema["required"]
            else:  # the connection binds the tenant: the schemas do not offer it at all
                assert "tenant" not in tool.input_schema["properties"]
            assert "ctx" not in tool.input_schema["properties"]

    async def test_add_then_recall_then_get_contents_round_trips_a_memory(self, acme: Caller) -> None:
        text = "The deployment key for orion lives in the vault under ops/orion, rotated monthly."
        added = await acme.ok("add_memory", session="roundtrip", agent="alice", content=text, type="note")
        assert added["ref"].startswith("mem:") and added["created"] is True
        recalled = await acme.ok("recall", query="orion deployment key vault", session="roundtrip")
        assert added["ref"] in refs_of(recalled)
        message = recalled["messages"][refs_of(recalled).index(added["ref"])]
        assert {"ref", "content", "type", "timestamp", "confidence"} <= set(message)
        assert "source" not in message  # empty fields are left out
        assert {**recalled.get("shared", {}), **message}["session"] == "roundtrip"  # per row, or shared
        got = await acme.ok("get_contents", refs=[added["ref"]])
        assert [row["content"] for row in got["found"]] == [text]
        assert got["missing"] == []

    async def test_only_long_rows_carry_preview_markers_and_the_preview_is_an_exact_prefix(self, acme: Caller) -> None:
        short = "zebra migration: short note"
        long = long_text("zebra migration plan", 1800)
        short_ref = (await acme.ok("add_memory", session="preview", agent="a", content=short))["ref"]
        long_ref = (await acme.ok("add_memory", session="preview", agent="a", content=long))["ref"]
        recalled = await acme.ok("recall", query="zebra migration", session="preview")
        by_ref = {m["ref"]: m for m in recalled["messages"]}
        assert by_ref[long_ref]["content"] == long[: preview_end(long, PREVIEW_CHARS)]
        assert by_ref[long_ref]["content_truncated"] is True
        assert by_ref[long_ref]["content_len"] == len(long)
        assert by_ref[short_ref]["content"] == short
        assert "content_truncated" not in by_ref[short_ref] and "content_len" not in by_ref[short_ref]

    async def test_a_preview_fed_back_in_exclude_contents_excludes_its_row(self, acme: Caller) -> None:
        long = long_text("nebula telescope calibration", 1500)
        ref = (await acme.ok("add_memory", session="exclude", agent="a", content=long))["ref"]
        first = await acme.ok("recall", query="nebula telescope calibration", session="exclude")
        preview = next(m["content"] for m in first["messages"] if m["ref"] == ref)
        again = await acme.ok(
            "recall", query="nebula telescope calibration", session="exclude", exclude_contents=[preview]
        )
        assert ref not in refs_of(again)

    async def test_full_content_past_the_budget_keeps_the_most_relevant_whole_and_reports_the_budget(
        self, acme: Caller
    ) -> None:
        for i in range(4):
            text = long_text(f"quasar survey {i}", 2000)
            await acme.ok("add_memory", session="budget", agent="a", content=text)
        full = await acme.ok("recall", query="quasar survey", session="budget", full_content=True)
        whole = [m for m in full["messages"] if "content_truncated" not in m]
        cut = [m for m in full["messages"] if m.get("content_truncated")]
        assert full["full_content_budget_chars"] == TEST_BUDGET_CHARS
        assert len(whole) == TEST_BUDGET_CHARS // 2000 and all(len(m["content"]) == 2000 for m in whole)
        assert cut and all(PREVIEW_CHARS * 0.8 <= len(m["content"]) <= PREVIEW_CHARS for m in cut)
        assert all(m["content_len"] == 2000 for m in cut)
        assert full["messages"][: len(whole)] == whole
        default = await acme.ok("recall", query="quasar survey", session="budget")
        assert all(m.get("content_truncated") for m in default["messages"])
        assert "full_content_budget_chars" not in default

    async def test_twenty_one_refs_are_refused_by_the_schema(self, acme: Caller) -> None:
        result = await acme.call("get_contents", refs=[f"mem:{i}" for i in range(1, 22)])
        assert error_code(result) == "INVALID_INPUT"
        assert "refs" in result.content[0].text  # type: ignore[union-attr]

    async def test_malformed_and_foreign_refs_land_in_missing(self, acme: Caller, beta: Caller) -> None:
        own = (await acme.ok("add_memory", session="refs", agent="a", content="acme's own row"))["ref"]
        foreign = (await beta.ok("add_memory", session="refs", agent="b", content="beta's secret row"))["ref"]
        asked = [own, foreign, "junk", "mem:0", "ep:x", "mem:99999999"]
        got = await acme.ok("get_contents", refs=asked)
        assert [row["ref"] for row in got["found"]] == [own]
        assert sorted(got["missing"]) == sorted(asked[1:])
        assert (await beta.ok("get_contents", refs=[own]))["missing"] == [own]

    async def test_errors_are_tool_errors_with_a_stable_code_and_one_sentence(self, acme: Caller) -> None:
        cases = {
            "EMPTY_CONTENT": await acme.call("add_memory", session="errors", agent="a", content="   "),
            "INVALID_CURSOR": await acme.call("query_recent_turns", session="errors", cursor="forged.cursor"),
            "NOT_FOUND": await acme.call("check_memory", ref="mem:99999999"),
            "INVALID_REF": await acme.call("check_memory", ref="not-a-ref"),
            "CONTENT_TOO_LARGE": await acme.call("add_memory", session="errors", agent="a", content="x" * 100_001),
            "UNKNOWN_TOOL": await acme.call("no_such_tool"),
        }
        for code, result in cases.items():
            assert error_code(result) == code

    async def test_an_argument_no_tool_takes_is_refused_naming_it_on_every_tool(self, acme: Caller) -> None:
        assert await refuses_unknown_arguments(acme) == {spec.name for spec in TOOL_SPECS}

    async def test_a_misspelt_visibility_is_refused_and_stores_nothing(self, acme: Caller) -> None:
        # issue 46: the typo stored the row shared, and another agent read alice's private text
        result = await acme.call("add_memory", session="typo", agent="alice", content="alice's private plan",
                                 visiblity="agent")
        assert error_code(result) == "INVALID_INPUT"
        assert "'visiblity'" in result.content[0].text and "'visibility'" in result.content[0].text  # type: ignore[union-attr]
        assert (await acme.ok("query_recent_turns", session="typo", viewer="alice"))["turns"] == []
        assert (await acme.ok("recall", query="alice's private plan", session="typo", viewer="bob"))["messages"] == []

    async def test_a_private_handoff_is_returned_only_to_its_author(self, acme: Caller) -> None:
        ref = (await acme.ok("create_handoff", session="private-handoff", agent="alice",
                             content="alice's private handoff: next, rotate the keys", visibility="agent"))["ref"]
        assert (await acme.ok("recover_context", session="private-handoff", viewer="alice"))["handoff"]["ref"] == ref
        assert (await acme.ok("recover_context", session="private-handoff", viewer="bob"))["handoff"] is None
        assert (await acme.ok("get_contents", refs=[ref], viewer="bob"))["missing"] == [ref]

    async def test_wrong_argument_types_are_tool_errors(self, acme: Caller) -> None:
        bad_calls = [
            ("recall", {"query": "x", "limit": "many"}),
            ("recall", {"query": "x", "limit": 51}),
            ("get_contents", {"refs": "mem:1"}),
            ("add_memory", {"session": "types", "agent": "a", "content": 5}),
            ("add_memory", {"session": "types", "agent": "a"}),
            ("query_recent_turns", {"session": "types", "limit": 101}),
        ]
        for tool, arguments in bad_calls:
            assert error_code(await acme.call(tool, **arguments)) == "INVALID_INPUT", (tool, arguments)

    async def test_recent_turns_page_newest_first_in_the_preview_tier(self, acme: Caller) -> None:
        texts = ["first turn", long_text("second turn", 900), "third turn"]
        refs = [
            (await acme.ok("add_memory", session="paging", agent="a", content=t, role="user"))["ref"] for t in texts
        ]
        page = await acme.ok("query_recent_turns", session="paging", limit=2)
        assert [t["ref"] for t in page["turns"]] == [refs[2], refs[1]]
        assert page["turns"][1]["content_truncated"] is True and page["turns"][1]["content_len"] == 900
        rest = await acme.ok("query_recent_turns", session="paging", limit=2, cursor=page["next_cursor"])
        assert [t["ref"] for t in rest["turns"]] == [refs[0]]
        assert rest["next_cursor"] is None

    async def test_check_memory_returns_the_full_row_and_its_neighbours(self, acme: Caller) -> None:
        before = (await acme.ok("add_memory", session="check", agent="a", content="earlier turn"))["ref"]
        long = long_text("checked row", 1200)
        ref = (await acme.ok("add_memory", session="check", agent="a", content=long))["ref"]
        checked = await acme.ok("check_memory", ref=ref)
        assert checked["memory"]["content"] == long and "content_truncated" not in checked["memory"]
        assert checked["neighbours"]["previous"]["ref"] == before

    async def test_delete_memory_removes_the_row_for_good(self, acme: Caller) -> None:
        ref = (await acme.ok("add_memory", session="delete", agent="a", content="to be forgotten"))["ref"]
        assert await acme.ok("delete_memory", ref=ref, viewer="a") == {"ref": ref, "deleted": True}
        assert (await acme.ok("get_contents", refs=[ref]))["missing"] == [ref]
        assert (await acme.ok("delete_memory", ref=ref, viewer="a"))["deleted"] is False

    async def test_agent_private_rows_are_returned_only_to_their_author(self, acme: Caller) -> None:
        ref = (
            await acme.ok("add_memory", session="private", agent="alice", content="alice's scratch", visibility="agent")
        )["ref"]
        assert (await acme.ok("get_contents", refs=[ref], viewer="bob"))["missing"] == [ref]
        assert [r["ref"] for r in (await acme.ok("get_contents", refs=[ref], viewer="alice"))["found"]] == [ref]

    async def test_recall_with_context_echoes_the_context_trimmed_and_without_refs(self, acme: Caller) -> None:
        said = long_text("we talked about the lighthouse", 700)
        context = [{"role": "user", "content": said}, {"role": "assistant", "content": "noted"}]
        await acme.ok("add_memory", session="ctx", agent="a", content="the lighthouse keeper retires in May")
        response = await acme.ok("recall_with_context", query="lighthouse", session="ctx", context=context)
        assert response["context"] == [
            {"role": "user", "content": said[:PREVIEW_CHARS], "content_truncated": True, "content_len": 700},
            {"role": "assistant", "content": "noted"},
        ]

    async def test_create_handoff_stores_a_salient_handoff_that_type_filtered_recall_finds(self, acme: Caller) -> None:
        first = await acme.ok("create_handoff", session="handoff", agent="a", content="handoff one: schema drafted")
        newest = await acme.ok("create_handoff", session="handoff", agent="a", content="handoff two: tests green")
        await acme.ok("add_memory", session="handoff", agent="a", content="a plain turn about the handoff")
        recalled = await acme.ok("recall", query="handoff", session="handoff", type="handoff")
        assert sorted(refs_of(recalled)) == sorted([first["ref"], newest["ref"]])
        assert all(m["type"] == "handoff" and m["salience"] == 0.95 for m in recalled["messages"])

    async def test_recover_context_returns_the_latest_handoff_whole_the_summary_and_the_newest_turns(
        self, acme: Caller
    ) -> None:
        turns = ["opened the ticket", long_text("investigated the flaky test", 900), "found the race"]
        refs = [
            (await acme.ok("add_memory", session="recover", agent="a", content=t, role="user"))["ref"] for t in turns
        ]
        await acme.ok("create_handoff", session="recover", agent="a", content="old handoff")
        handoff_text = long_text("handoff: fix the race in the scheduler next", 1200)
        handoff = await acme.ok("create_handoff", session="recover", agent="a", content=handoff_text)
        recovered = await acme.ok("recover_context", session="recover", turns=2)
        assert recovered["handoff"]["ref"] == handoff["ref"]
        assert recovered["handoff"]["content"] == handoff_text
        assert recovered["summary"]["summary_source"] in {"model", "fallback"} and recovered["summary"]["summary"]
        assert [t["ref"] for t in recovered["turns"]] == [refs[2], refs[1]]
        assert recovered["turns"][1]["content_truncated"] is True
        assert len(recovered["turns"][1]["content"]) == 200  # recover.turn_preview_chars
        older = await acme.ok("query_recent_turns", session="recover", cursor=recovered["next_cursor"])
        assert [t["ref"] for t in older["turns"]] == [refs[0]]

    async def test_summarize_session_stores_an_episode_cached_until_the_session_grows(self, acme: Caller) -> None:
        await acme.ok("add_memory", session="summary", agent="a", content="we chose postgres for the ledger")
        first = await acme.ok("summarize_session", session="summary")
        assert first["ref"].startswith("ep:") and first["summary"] and first["cached"] is False
        assert first["summary_source"] in {"model", "fallback"}
        assert (await acme.ok("summarize_session", session="summary"))["cached"] is True
        await acme.ok("add_memory", session="summary", agent="a", content="and redis for the queue")
        assert (await acme.ok("summarize_session", session="summary"))["cached"] is False
        assert (await acme.ok("get_contents", refs=[first["ref"]]))["missing"] == []
        assert error_code(await acme.call("summarize_session", session="never-used")) == "NOT_FOUND"
