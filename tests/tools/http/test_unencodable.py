"""The stand-in for a request holding a lone surrogate (tools/http/unencodable.py), as pure logic;
the transports are tested end to end in test_mcp_stdio_parse_errors.py and
test_mcp_http_lone_surrogate.py."""

from __future__ import annotations

import json

import pytest

from tools.http.unencodable import MARK, SURROGATE_ESCAPE, marked_line, marked_request, sentence, unencodable_paths


@pytest.mark.parametrize("code", [0xD800, 0xDBFF, 0xDC00, 0xDFFF])
def test_every_surrogate_escape_is_seen_in_the_raw_bytes_whatever_its_case(code: int) -> None:
    for escape in (f"\\u{code:04x}", f"\\u{code:04X}"):
        assert SURROGATE_ESCAPE.search(escape.encode())
    assert not SURROGATE_ESCAPE.search(b"\\u00e9 \\ud7ff \\ue000")


def test_paths_name_each_bad_string_and_the_object_of_a_bad_key() -> None:
    value = {"content": "ok", "entities": [{"name": "a\udc00"}, {"name": "b"}], "metadata": {"k\ud800": 1},
             "source": {"id": "\ud800"}}
    assert unencodable_paths(value) == ["entities[0].name", "metadata", "source.id"]
    assert unencodable_paths({"content": "a paired \U0001f600 is text"}) == []


def test_a_tool_call_keeps_its_id_and_name_and_loses_its_arguments() -> None:
    line = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"add_memory","arguments":' \
           '{"content":"\\ud800","session":"s"}}}'
    marked = marked_line(line)
    assert marked == {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                      "params": {"name": "add_memory", "arguments": {}, "_meta": {MARK: ["content"]}}}
    json.dumps(marked).encode("utf-8")  # the stand-in is plain text
    bad_name = marked_request({"jsonrpc": "2.0", "id": "x", "method": "tools/call", "params": {"name": "a\ud800"}})
    assert bad_name is not None and bad_name["params"]["name"] == "a\\ud800"
    assert bad_name["params"]["_meta"][MARK] == ["name"]


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "\ud800"}},  # no id
    {"jsonrpc": "2.0", "id": True, "method": "ping", "params": {"x": "\ud800"}},  # not a usable id
    {"jsonrpc": "2.0", "id": "\ud800", "method": "ping"},  # the id itself cannot be sent back
    {"jsonrpc": "2.0", "id": 3, "result": {"x": "\ud800"}},  # a response
    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "recall", "arguments": {"q": "ok"}}},
])
def test_what_has_no_id_to_answer_under_or_nothing_to_refuse_gets_no_stand_in(message: dict[str, object]) -> None:
    assert marked_request(message) is None


def test_the_sentence_is_one_line_and_says_argument_or_parameter() -> None:
    assert sentence(["content"]).startswith("Argument 'content' holds a lone surrogate")
    assert sentence(["params.cursor", "params.x"]).startswith("Parameter 'params.cursor' (and 1 more)")
    assert "\n" not in sentence(["content"]) and sentence(["content"]).endswith(".")
