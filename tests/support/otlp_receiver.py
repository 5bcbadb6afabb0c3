"""A loopback OTLP/HTTP trace receiver: what a collector would get, decoded, for tests.

``receiving()`` yields a :class:`Receiver` whose ``endpoint`` takes ``POST /v1/traces`` (protobuf, as the
OTLP/HTTP exporter sends it) and keeps every span as a :class:`Span` (name, ids, parent, attributes).
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)


@dataclass(frozen=True)
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    start_ns: int
    end_ns: int
    service: str


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return getattr(v, kind) if kind else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.lock = threading.Lock()
        self.endpoint = ""

    def add(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self.lock:
            for resource in request.resource_spans:
                service = next((_value(a.value) for a in resource.resource.attributes if a.key == "service.name"), "")
                for scope in resource.scope_spans:
                    for s in scope.spans:
                        self.spans.append(Span(s.name, s.trace_id.hex(), s.span_id.hex(), s.parent_span_id.hex(),
                                               {a.key: _value(a.value) for a in s.attributes},
                                               s.start_time_unix_nano, s.end_time_unix_nano, service))

    def wait_for(self, name: str, timeout_s: float = 30.0) -> list[Span]:
        """The spans named ``name`` once at least one has arrived (the exporter sends in batches)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                found = [s for s in self.spans if s.name == name]
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError(f"no span {name!r} arrived; got {sorted({s.name for s in self.spans})}")


@contextmanager
def receiving() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            if self.headers.get("content-encoding") == "gzip":
                body = gzip.decompress(body)
            receiver.add(body)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
