"""A loopback stand-in for the model API, for running the real Claude Code CLI in tests.

Point Claude Code at it with ``ANTHROPIC_BASE_URL=<stand_in.url>`` and any API key. It answers
``POST /v1/messages`` (streamed as server-sent events when asked, else JSON) and
``/v1/messages/count_tokens``, keeps every request body it received (``requests``), and plays a
tiny scripted agent:

- a prompt may hold directives, ``RUN <Tool> <json input>`` one a line: the stand-in answers with a
  ``tool_use`` block for the first, then, after each tool result, for the next; Claude Code runs the
  tools for real, so the transcript is a real one;
- a compaction request (Claude Code's "create a detailed summary" prompt) gets a short summary;
- anything else gets a one-line text reply.

Stdlib only; ``python -m tests.support.model_standin`` runs one in the foreground and prints its URL.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DIRECTIVE = re.compile(r"^RUN (\w+) (\{.*\})\s*$", re.MULTILINE)
COMPACTION_MARKERS = ("create a detailed summary of the conversation", "CRITICAL: Respond with TEXT ONLY")
SUMMARY = ("<analysis>The user asked for work on a project; tools ran.</analysis>\n"
           "<summary>1. Primary Request and Intent: work on the project (details were in the conversation).</summary>")


class StandIn:
    """The stand-in server on 127.0.0.1 and a free port (a context manager)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    body = {}
                if self.path.startswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": len(json.dumps(body)) // 4})
                    return
                if not self.path.startswith("/v1/messages"):
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})
                    return
                with standin._lock:
                    standin.requests.append(body)
                blocks = answer(body)
                message_id = f"msg_{uuid.uuid4().hex}"
                stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
                if body.get("stream"):
                    self._stream(message_id, body.get("model"), blocks, stop)
                else:
                    self._json(200, {"id": message_id, "type": "message", "role": "assistant",
                                     "model": body.get("model"), "content": blocks, "stop_reason": stop,
                                     "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 20}})

            def _json(self, status: int, value: dict[str, Any]) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, message_id: str, model: Any, blocks: list[dict[str, Any]], stop: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.send_header("connection", "close")
                self.end_headers()
                for name, data in events(message_id, model, blocks, stop):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> StandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def conversation_requests(self) -> list[dict[str, Any]]:
        """The requests that carried a conversation (not compaction requests)."""
        with self._lock:
            return [r for r in self.requests if not is_compaction(r)]


def texts(value: Any) -> Iterator[str]:
    """Every string inside a request body (messages, system prompt, tools)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)


def is_compaction(body: dict[str, Any]) -> bool:
    last = _conversation(body)[-1:] or [{}]
    return any(marker in text for text in texts(last[0].get("content")) for marker in COMPACTION_MARKERS)


def _conversation(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") in ("user", "assistant")]


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks the stand-in replies with (see the module docstring)."""
    if is_compaction(body):
        return [{"type": "text", "text": SUMMARY}]
    messages = _conversation(body)
    # the prompt that started this turn: the last user message holding text that is not a tool result
    start = max((i for i, m in enumerate(messages) if m.get("role") == "user" and any(
        b.get("type") == "text" and not b.get("text", "").startswith("<system-reminder>") for b in _blocks(m))),
        default=-1)
    if start < 0:
        return [{"type": "text", "text": "Hello."}]
    prompt = "\n".join(b.get("text", "") for b in _blocks(messages[start]) if b.get("type") == "text")
    directives = DIRECTIVE.findall(prompt)
    done = sum(1 for m in messages[start:] for b in _blocks(m) if b.get("type") == "tool_result")
    if done < len(directives):
        name, raw = directives[done]
        return [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": name, "input": json.loads(raw)}]
    said = prompt.strip().splitlines()[-1][:80] if prompt.strip() else ""
    return [{"type": "text", "text": f"Done ({len(directives)} tool calls). Next: {said}"}]


def events(message_id: str, model: Any, blocks: list[dict[str, Any]], stop: str) -> Iterator[tuple[str, Any]]:
    """The server-sent events of one streamed message."""
    yield "message_start", {"type": "message_start", "message": {
        "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": 100, "output_tokens": 1}}}
    for index, block in enumerate(blocks):
        if block["type"] == "tool_use":
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {**block, "input": {}}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}}
        else:
            yield "content_block_start", {"type": "content_block_start", "index": index,
                                          "content_block": {"type": "text", "text": ""}}
            yield "content_block_delta", {"type": "content_block_delta", "index": index,
                                          "delta": {"type": "text_delta", "text": block["text"]}}
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                            "usage": {"output_tokens": 20}}
    yield "message_stop", {"type": "message_stop"}


if __name__ == "__main__":
    import time

    with StandIn() as running:
        print(running.url, flush=True)
        while True:
            time.sleep(3600)
