"""stdio: every line that is not a JSON-RPC message is answered with a JSON-RPC error, and a
request holding a lone surrogate escape (``"\\ud800"``) is answered under its own id.

Before, the SDK's transport dropped such a line and the client waited for its own timeout; a
lone surrogate then got a parse error with ``id: null``, and the client still waited (issue 37,
point 2). The line is valid JSON: only a string cannot be encoded, so a ``tools/call`` gets a
coded INVALID_INPUT tool error naming the argument, any other request a JSON-RPC error with its
id. The server is the real ``memory-core serve`` subprocess, both ways it runs over stdio: the
bridge to the shared server (the default) and the in-process server (``--exclusive``); the
test writes raw bytes to its stdin and reads raw lines from its stdout.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from testbed.mcp_harness import ROOT, server_env

pytestmark = pytest.mark.slow  # every test here starts processes or servers (seconds each)

BIN = Path(sys.executable).with_name("memory-core")
REPLY_TIMEOUT_S = 20.0
CLIENT = {"name": "raw", "version": "1"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}}  # fmt: skip


class RawStdio:
    """The server's stdin and stdout as bytes and lines, with a timeout on every read."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc = proc
        self.stdin: IO[bytes] = proc.stdin
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._pump, args=(proc.stdout,), daemon=True).start()

    def _pump(self, stdout: IO[bytes]) -> None:
        for line in stdout:
            self.lines.put(line)

    def write(self, raw: bytes) -> None:
        self.stdin.write(raw)
        self.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.write(json.dumps(message).encode() + b"\n")

    def reply(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=REPLY_TIMEOUT_S)
        except queue.Empty:
            raise AssertionError("the server sent no reply (silence)") from None
        message: dict[str, Any] = json.loads(line)
        return message


@pytest.fixture(params=["bridge", "exclusive"])
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[RawStdio]:
    mode = ["--exclusive"] if request.param == "exclusive" else []
    proc = subprocess.Popen(
        [str(BIN), "serve", *mode, "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    raw = RawStdio(proc)
    try:
        raw.send(INIT)
        assert raw.reply()["id"] == 1
        raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield raw
    finally:
        proc.kill()
        proc.wait()


def _add(content_json: str, request_id: int) -> bytes:
    return (
        '{"jsonrpc":"2.0","id":' + str(request_id) + ',"method":"tools/call","params":{"name":"add_memory",'
        '"arguments":{"tenant":"acme","session":"raw","agent":"a","content":' + content_json + "}}}\n"
    ).encode()


@pytest.mark.parametrize(
    "line",
    [
        b"this is not json\n",
        b'{"jsonrpc": "2.0", "id": 3, "method": "ping"\n',  # cut short
        b'\xff\xfe{"jsonrpc":"2.0","id":6,"method":"ping"}\n',  # not UTF-8
        b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"\\ud800","progress":1}}\n',
    ],
)
def test_a_line_that_is_not_valid_json_gets_a_parse_error_reply(server: RawStdio, line: bytes) -> None:
    server.write(line)
    reply = server.reply()
    assert reply["jsonrpc"] == "2.0" and reply["id"] is None
    assert reply["error"]["code"] == -32700 and reply["error"]["message"].startswith("Parse error")


def test_json_that_is_not_a_json_rpc_message_gets_invalid_request_with_its_id(server: RawStdio) -> None:
    server.send({"jsonrpc": "2.0", "id": 9})
    reply = server.reply()
    assert (reply["id"], reply["error"]["code"]) == (9, -32600)
    server.write(b"[1, 2, 3]\n")
    reply = server.reply()
    assert (reply["id"], reply["error"]["code"]) == (None, -32600)


def _recent(server: RawStdio, request_id: int) -> list[dict[str, Any]]:
    page = {"name": "query_recent_turns", "arguments": {"tenant": "acme", "session": "raw"}}
    server.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": page})
    reply = server.reply()
    assert reply["id"] == request_id
    turns: list[dict[str, Any]] = reply["result"]["structuredContent"]["turns"]
    return turns


def test_after_a_bad_line_the_server_answers_on_and_wrote_nothing(server: RawStdio) -> None:
    server.write(b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":\n')
    assert server.reply()["error"]["code"] == -32700
    server.write(b"\n")  # a blank line carries no message: no reply, and nothing out of step
    assert _recent(server, 12) == []


@pytest.mark.parametrize(
    ("content_json", "field"),
    [
        ('"\\ud800"', "content"),
        ('"half a pair \\ud800 of surrogates"', "content"),
        ('"a lone low surrogate \\udc00"', "content"),
        ('"ok", "entities": [{"name": "Orion \\udfff"}]', "entities[0].name"),
        ('"ok", "metadata": {"\\ud800key": 1}', "metadata"),
    ],
)
def test_a_lone_surrogate_in_a_tool_call_is_invalid_input_under_the_calls_own_id(
    server: RawStdio, content_json: str, field: str
) -> None:
    server.write(_add(content_json, 21))
    reply = server.reply()
    assert reply["id"] == 21 and "error" not in reply
    result = reply["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("INVALID_INPUT: ") and f"'{field}" in text and "lone surrogate" in text, text
    assert "\n" not in text and text.endswith(".")
    error = result["structuredContent"]["error"]
    assert error["code"] == "INVALID_INPUT" and error["field"].startswith(field)
    assert _recent(server, 22) == []  # nothing was written
    good = _add('"a good line after it"', 23)
    server.write(good)
    assert server.reply()["result"].get("isError") is not True
    assert [t["content"] for t in _recent(server, 24)] == ["a good line after it"]


def test_a_lone_surrogate_in_another_request_is_a_json_rpc_error_under_its_own_id(server: RawStdio) -> None:
    server.write(b'{"jsonrpc":"2.0","id":"list-1","method":"tools/list","params":{"cursor":"\\ud800"}}\n')
    reply = server.reply()
    assert reply["id"] == "list-1" and reply["error"]["code"] == -32602
    assert "lone surrogate" in reply["error"]["message"]
    server.send({"jsonrpc": "2.0", "id": 31, "method": "tools/list"})
    listed = server.reply()
    assert listed["id"] == 31 and listed["result"]["tools"]
