"""A tiny OpenAI-compatible chat-completions server for provider tests.

Why a real HTTP server rather than mocking litellm: the behaviour under test (timeouts,
connection errors, status-code mapping, retry counts) lives in litellm/openai/httpx, so the
only honest check is to let those libraries talk to a socket. stdlib ``http.server`` in a
daemon thread keeps this dependency-free and starts in milliseconds.

Behaviours are scripted: a queue consumed one per request, then a default that repeats.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

BehaviourKind = Literal["ok", "status", "slow", "malformed", "empty", "no_choices"]


@dataclass(frozen=True)
class Behaviour:
    """How the server answers one request."""

    kind: BehaviourKind
    text: str = "A short summary."
    status: int = 200
    delay_s: float = 0.0


def ok(text: str = "A short summary.") -> Behaviour:
    """Answer 200 with a well-formed completion whose message content is ``text``."""
    return Behaviour("ok", text=text)


def long_text(chars: int = 1000) -> Behaviour:
    """Answer 200 with a completion far longer than any summary cap."""
    words = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * (chars // 50 + 1)).split()
    return Behaviour("ok", text=" ".join(words)[:chars])


def status(code: int) -> Behaviour:
    """Answer with an OpenAI-style error body and the given HTTP status."""
    return Behaviour("status", status=code)


def slow(seconds: float, text: str = "A late summary.") -> Behaviour:
    """Sleep before answering 200, to push the client past its timeout."""
    return Behaviour("slow", text=text, delay_s=seconds)


def malformed() -> Behaviour:
    """Answer 200 with a body that is not JSON."""
    return Behaviour("malformed")


def empty() -> Behaviour:
    """Answer 200 with valid JSON but blank message content (junk)."""
    return Behaviour("empty")


def no_choices() -> Behaviour:
    """Answer 200 with valid JSON that lacks ``choices`` (junk)."""
    return Behaviour("no_choices")


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (headers lower-cased)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeLLM:
    """Handle on a running fake server: its base URL, script and request log."""

    host: str
    port: int
    default: Behaviour = field(default_factory=ok)
    script: list[Behaviour] = field(default_factory=list)
    requests: list[RecordedRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def api_base(self) -> str:
        """Base URL to hand to litellm (the client appends ``/chat/completions``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def request_count(self) -> int:
        """How many chat-completion requests arrived (whatever was answered)."""
        with self._lock:
            return len(self.requests)

    def enqueue(self, *behaviours: Behaviour) -> None:
        """Queue behaviours for the next requests, in order."""
        with self._lock:
            self.script.extend(behaviours)

    def _next(self, request: RecordedRequest) -> Behaviour:
        with self._lock:
            self.requests.append(request)
            return self.script.pop(0) if self.script else self.default


def _completion(text: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


EMBEDDING_DIM = 32


def fake_vector(text: str) -> list[float]:
    """Deterministic bag-of-words vector: texts sharing words point the same way."""
    vec = [0.0] * EMBEDDING_DIM
    for word in text.lower().split():
        digest = hashlib.blake2b(word.strip(".,!?:;").encode(), digest_size=4).digest()
        vec[int.from_bytes(digest, "little") % EMBEDDING_DIM] += 1.0
    return vec if any(vec) else [1.0] + [0.0] * (EMBEDDING_DIM - 1)


def _embeddings(inputs: Any, model: str) -> dict[str, Any]:
    texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
    return {
        "object": "list",
        "model": model,
        "data": [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(texts)],
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


def _make_handler(fake: FakeLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 so the openai client can keep connections alive, as with a real server.
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # silence stderr noise
            return

        def _send(self, code: int, payload: bytes, content_type: str = "application/json") -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            embeddings = self.path.rstrip("/") in ("/embeddings", "/v1/embeddings")
            if not embeddings and self.path.rstrip("/") not in ("/chat/completions", "/v1/chat/completions"):
                self._send(404, b'{"error": {"message": "not found"}}')
                return
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsed": raw.decode("utf-8", "replace")}
            headers = {k.lower(): v for k, v in self.headers.items()}
            behaviour = fake._next(RecordedRequest(self.path, headers, body))
            model = str(body.get("model", "fake"))
            if behaviour.kind == "slow":
                time.sleep(behaviour.delay_s)
            try:
                if behaviour.kind in ("ok", "slow") and embeddings:
                    self._send(200, json.dumps(_embeddings(body.get("input"), model)).encode())
                elif behaviour.kind in ("ok", "slow"):
                    self._send(200, json.dumps(_completion(behaviour.text, model)).encode())
                elif behaviour.kind == "empty":
                    self._send(200, json.dumps(_completion("   ", model)).encode())
                elif behaviour.kind == "no_choices":
                    body_out = _completion("", model)
                    del body_out["choices"]
                    self._send(200, json.dumps(body_out).encode())
                elif behaviour.kind == "malformed":
                    self._send(200, b"{this is not json")
                else:
                    err = {"error": {"message": f"scripted {behaviour.status}", "type": "fake_error"}}
                    self._send(behaviour.status, json.dumps(err).encode())
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (timeout) before we answered; nothing to report.
                pass

    return Handler


@contextmanager
def fake_llm(default: Behaviour | None = None) -> Iterator[FakeLLM]:
    """Run a fake server on 127.0.0.1 with a random free port for the duration of the block."""
    fake = FakeLLM(host="127.0.0.1", port=0, default=default or ok())
    server = ThreadingHTTPServer(("127.0.0.1", 0), _make_handler(fake))
    server.daemon_threads = True  # slow handlers must not hold up shutdown
    fake.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
