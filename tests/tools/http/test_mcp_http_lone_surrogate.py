"""HTTP: a request holding a lone surrogate escape (``"\\ud800"``) is answered like any bad
argument, under its own id (issue 37, point 2).

The body is valid JSON; only a string in it cannot be encoded. The SDK's parser refused the
whole body with a 400 and ``id: null``. Now a ``tools/call`` gets the coded INVALID_INPUT tool
error naming the argument (as over stdio), another request a JSON-RPC error with its id, and
nothing is written. Raw bodies over plain httpx against the real ``serve --http`` subprocess.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.http_raw import RawSession, serving


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawSession]:
    with serving("127.0.0.1", tmp_path_factory.mktemp("surrogate") / "data") as url:
        raw = RawSession(url)
        yield raw
        raw.http.close()


def post(session: RawSession, body: bytes, **headers: str) -> httpx.Response:
    return session.http.post(session.url, content=body, headers=session._headers(headers))


def answer(response: httpx.Response) -> dict[str, Any]:
    """The one JSON-RPC message of a response: a JSON body or the data of an SSE event."""
    if response.headers["content-type"].startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        messages = [json.loads(d) for d in data if d]
        assert len(messages) == 1, response.text
        return messages[0]  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


def add_body(request_id: int, content_json: str) -> bytes:
    return ('{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call","params":{"name":"add_memory",'
            '"arguments":{"tenant":"acme","session":"raw","agent":"a","content":' + content_json + "}}}").encode()


def recent(session: RawSession) -> list[dict[str, Any]]:
    response = session.call("query_recent_turns", {"tenant": "acme", "session": "raw"})
    turns: list[dict[str, Any]] = answer(response)["result"]["structuredContent"]["turns"]
    return turns


@pytest.mark.slow
@pytest.mark.parametrize(("content_json", "field"), [('"\\ud800"', "content"),
                                                     ('"x", "entities": [{"name": "a\\udc00"}]', "entities[0].name")])
def test_a_lone_surrogate_in_a_tool_call_is_the_same_invalid_input_tool_error_not_a_400(
    session: RawSession, content_json: str, field: str
) -> None:
    response = post(session, add_body(41, content_json))
    assert response.status_code == 200, response.text
    reply = answer(response)
    assert reply["id"] == 41 and reply["result"]["isError"] is True
    text = reply["result"]["content"][0]["text"]
    assert text.startswith("INVALID_INPUT: ") and f"'{field}'" in text and "lone surrogate" in text
    assert reply["result"]["structuredContent"]["error"] == {"code": "INVALID_INPUT", "message": text[15:],
                                                             "field": field}
    assert recent(session) == []


def test_a_stale_session_id_is_answered_like_any_request_and_other_requests_get_a_json_rpc_error(
    session: RawSession,
) -> None:
    # the server keeps no sessions: an id from before a restart is no reason to refuse (tools/serve/http.py)
    stale = session.http.post(session.url, content=add_body(42, '"\\ud800"'),
                              headers={**session._headers({}), "mcp-session-id": "not-a-session"})
    reply = answer(stale)
    assert reply["id"] == 42 and reply["result"]["isError"] is True
    assert reply["result"]["content"][0]["text"].startswith("INVALID_INPUT: ")
    listed = post(session, b'{"jsonrpc":"2.0","id":43,"method":"tools/list","params":{"cursor":"\\ud800"}}')
    reply = answer(listed)
    assert reply["id"] == 43 and reply["error"]["code"] == -32602 and "lone surrogate" in reply["error"]["message"]


@pytest.mark.slow
def test_a_valid_surrogate_pair_is_text_and_is_stored(session: RawSession) -> None:
    response = post(session, add_body(44, '"a paired escape \\ud83d\\ude00 is fine"'))
    assert answer(response)["result"].get("isError") is not True
    assert [t["content"] for t in recent(session)] == ["a paired escape \U0001f600 is fine"]
