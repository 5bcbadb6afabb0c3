"""A loopback stand-in for the Anthropic Messages API, so the real Claude Code CLI runs without a model.

Claude Code reads ``ANTHROPIC_BASE_URL``; pointed here (with any key) it sends its requests to
``POST /v1/messages`` and gets, streamed as server-sent events the way the API streams them, whatever
the test's ``script`` answers: text, or ``tool_use`` blocks that make it call tools — MCP tools
included (``mcp__<server>__<tool>``). The script sees each request's body, so it can answer by where
the conversation is (how many tool results came back) and act in between (restart a server).
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ToolUse:
    name: str
    input: dict[str, Any]


Reply = str | list[ToolUse]  # a text answer (the turn ends), or tool calls (Claude Code runs them and asks again)
Script = Callable[[dict[str, Any]], Reply]


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks the conversation holds so far, oldest first."""
    return [block for message in body.get("messages", []) if message.get("role") == "user"
            and isinstance(message.get("content"), list) for block in message["content"]
            if block.get("type") == "tool_result"]


def offered(body: dict[str, Any]) -> set[str]:
    """The names of the tools the request offers the model."""
    return {str(tool.get("name")) for tool in body.get("tools", [])}


@dataclass
class StandIn:
    script: Script
    base_url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)


def _events(blocks: list[dict[str, Any]], stop: str, model: str) -> Iterator[tuple[str, dict[str, Any]]]:
    yield "message_start", {"type": "message_start", "message": {
        "id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1}}}
    for i, block in enumerate(blocks):
        if block["type"] == "text":
            yield "content_block_start", {"type": "content_block_start", "index": i,
                                          "content_block": {"type": "text", "text": ""}}
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            yield "content_block_start", {"type": "content_block_start", "index": i, "content_block": start}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 5}}
    yield "message_stop", {"type": "message_stop"}


@contextmanager
def standing_in(script: Script) -> Iterator[StandIn]:
    """Serve the stand-in on 127.0.0.1 and a free port; ``base_url`` is what ``ANTHROPIC_BASE_URL`` takes."""
    stand_in = StandIn(script)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def _json(self, status: int, value: dict[str, Any]) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "stand-in"}})

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            if "count_tokens" in self.path:
                self._json(200, {"input_tokens": 10})
                return
            if not self.path.startswith("/v1/messages"):
                self.do_GET()
                return
            with lock:  # one answer at a time: a script may restart things between two
                stand_in.requests.append(body)
                reply = stand_in.script(body)
            if isinstance(reply, str):
                blocks: list[dict[str, Any]] = [{"type": "text", "text": reply}]
                stop = "end_turn"
            else:
                blocks = [{"type": "tool_use", "id": "toolu_" + uuid.uuid4().hex[:24], "name": use.name,
                           "input": use.input} for use in reply]
                stop = "tool_use"
            model = str(body.get("model", "stand-in"))
            if not body.get("stream"):
                self._json(200, {"id": "msg_" + uuid.uuid4().hex[:24], "type": "message", "role": "assistant",
                                 "model": model, "content": blocks, "stop_reason": stop, "stop_sequence": None,
                                 "usage": {"input_tokens": 10, "output_tokens": 5}})
                return
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.end_headers()
            for name, data in _events(blocks, stop, model):
                self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    stand_in.base_url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield stand_in
    finally:
        server.shutdown()
        server.server_close()
