"""Where ``memory-core hook`` reads and writes: the data directory's shared server, or the store itself.

:func:`open_hook_store` picks the :class:`~memory_core.harness.store.HookStore`:

- ``shared`` (and ``auto``, the default): :class:`SharedStore`, the MCP tools of the directory's
  shared server over HTTP — the server a running ``memory-core serve`` (stdio bridge or ``--http``)
  announces in ``mcp-server.json``, started detached when none runs, exactly as a stdio client
  starts it. A running server stays the data directory's one writer, and a warm one answers in
  milliseconds (the embedding model stays loaded between events);
- ``direct``: :class:`~memory_core.harness.store.DirectStore` on a ``MemoryCore`` opened in the hook's
  process (STORE_LOCKED when a server holds the directory). For stores without a server: replicas on
  PostgreSQL and Chroma's server mode, tests.

This is the one module of the hook that knows the shared server's record, secret and proof
(``tools.server_record``, ``tools.bridge.locate``): it authenticates the server before sending anything (the
hello and its HMAC proof), then sends self-contained MCP requests (the 2026-07-28 wire: no
session to open) with a bridge token that binds the hook's tenant, agent and scope, on one
keep-alive connection. Stdlib only: a warm event must not pay for the MCP SDK.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory_core import MemoryCoreError, Scope, StoreUnavailableError, parse_scope
from memory_core.harness import Ack, Added, Binding, CapturedRow, DirectStore, HookStore, Recovered, StoredRow
from tools.bridge.locate import (
    SharedServerError,
    UnprovenServer,
    connect_verified,
    ensure_shared_server,
    live_announcement,
)
from tools.server_record import ANNOUNCEMENT, Announcement, BridgeBinding, bridge_token

if TYPE_CHECKING:
    from memory_core import Settings

PROTOCOL = "2026-07-28"
MCP_PATH = "/mcp"
CLIENT_INFO = {"name": "memory-core-hook", "version": "1"}
ROW_REFUSALS = frozenset({"INVALID_INPUT", "EMPTY_CONTENT", "CONTENT_TOO_LARGE", "SECRET_REJECTED",
                          "POISONING_REJECTED"})
SESSION_PAGE = 100
WRITERS = 4  # concurrent add_memory calls of one capture
RECALL_CAP = 50  # server.mcp_limit_cap's default: what a recall may ask for over MCP


class ToolError(MemoryCoreError):
    """A tool call the shared server answered with an error; ``code`` is the server's."""

    def __init__(self, code: str, message: str, **fields: Any) -> None:
        super().__init__(message, **fields)
        self.code = code


class SharedStore:
    """:class:`HookStore` through the MCP tools of the data directory's shared server."""

    def __init__(self, server: Announcement, binding: Binding, scope: str, *, deadline: float) -> None:
        self.server = server
        self.binding = binding
        self._scope = scope
        bound = BridgeBinding(binding.tenant, binding.agent, parse_scope(scope) or Scope.READ)
        self._token = bridge_token(server.secret, bound)
        self._deadline = deadline
        self._conn: http.client.HTTPConnection | None = None
        self._ids = 0

    # ---- the wire ----------------------------------------------------------------------------
    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """One tool call's structured result; ToolError for a tool error, SERVER_UNAVAILABLE when the
        server cannot be reached or stops answering within the hook's time."""
        self._ids += 1
        body = json.dumps({"jsonrpc": "2.0", "id": self._ids, "method": "tools/call", "params": {
            "name": tool, "arguments": arguments, "_meta": {
                "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
                "io.modelcontextprotocol/clientCapabilities": {}}}}, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "Authorization": f"Bearer {self._token}", "Mcp-Protocol-Version": PROTOCOL,
                   "Mcp-Method": "tools/call", "Mcp-Name": tool}
        for attempt in (1, 2):
            reused = self._conn is not None
            try:
                conn = self._connection()
                conn.request("POST", MCP_PATH, body, headers)
                response = conn.getresponse()
                raw = response.read()
                break
            except (OSError, http.client.HTTPException, UnprovenServer) as exc:
                self._drop()
                # a kept-alive connection the server closed meanwhile: every call here is safe to send again
                # (reads, and writes with an idempotency key), so once more on a fresh, proven connection
                if attempt == 1 and reused and not isinstance(exc, TimeoutError):
                    continue
                raise SharedServerError(f"The shared memory-core server ({self.server.url}) did not answer {tool} "
                                        f"({type(exc).__name__}).") from exc
        return _result(tool, response.status, response.getheader("content-type") or "", raw)

    def _connection(self) -> http.client.HTTPConnection:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the hook's time is up")
        if self._conn is None:
            self._conn = connect_verified(self.server, min(5.0, left))
        assert self._conn.sock is not None
        self._conn.sock.settimeout(left)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ---- HookStore -----------------------------------------------------------------------------
    def add_rows(self, session: str, project: str | None, rows: Sequence[CapturedRow]) -> Added:
        """Rows go ``WRITERS`` at a time, each on its own proven connection: the server's group commit
        writes concurrent adds together (3x the rows a second of one-by-one here). Their timestamps come
        from the transcript, so the order they land in changes nothing a reader sees."""
        if len(rows) <= 1:
            return self._add_each(session, project, rows)
        failed = threading.Event()
        local = threading.local()
        lock = threading.Lock()
        acks: list[Ack] = []
        errors: list[MemoryCoreError] = []
        clones: list[SharedStore] = []

        def one(row: CapturedRow) -> None:
            if failed.is_set():
                return
            if not hasattr(local, "store"):
                local.store = SharedStore(self.server, self.binding, self._scope, deadline=self._deadline)
                with lock:
                    clones.append(local.store)
            added = local.store._add_each(session, project, [row])
            with lock:
                acks.extend(added.acks)
                if added.error is not None:
                    errors.append(added.error)
                    failed.set()

        try:
            with ThreadPoolExecutor(WRITERS, thread_name_prefix="memory-core-hook-add") as pool:
                list(pool.map(one, rows))
        finally:
            for clone in clones:
                clone.close()
        return Added(acks, errors[0] if errors else None)

    def _add_each(self, session: str, project: str | None, rows: Sequence[CapturedRow]) -> Added:
        acks: list[Ack] = []
        for row in rows:
            arguments: dict[str, Any] = {"session": session, "content": row.content, "type": "turn",
                                         "role": row.role, "idempotency_key": row.key, "metadata": row.metadata,
                                         "channel": "hook", "provenance": row.provenance}
            if project:
                arguments["project_id"] = project
            if row.at:
                arguments["timestamp"] = row.at
            try:
                answer = self.call("add_memory", arguments)
            except ToolError as exc:
                if exc.code in ROW_REFUSALS:
                    acks.append(Ack(row.key, refused=exc.code))
                    continue
                return Added(acks, exc)
            except MemoryCoreError as exc:
                return Added(acks, exc)
            ref = answer.get("ref")  # null: write-time hygiene did not store it (stored: false), a success
            acks.append(Ack(row.key, str(ref) if ref else None, bool(answer.get("created", True))))
        return Added(acks)

    def add_handoff(self, session: str, project: str | None, content: str, key: str,
                    metadata: dict[str, Any]) -> str:
        arguments: dict[str, Any] = {"session": session, "content": content, "type": "handoff",
                                     "idempotency_key": key, "metadata": metadata, "channel": "hook",
                                     "provenance": "hook"}
        if project:
            arguments["project_id"] = project
        return str(self.call("add_memory", arguments)["ref"])

    def session_rows(self, session: str, limit: int) -> list[StoredRow]:
        rows: list[StoredRow] = []
        cursor: str | None = None
        while len(rows) < limit:
            arguments: dict[str, Any] = {"session": session, "limit": min(SESSION_PAGE, limit - len(rows))}
            if cursor is not None:
                arguments["cursor"] = cursor
            page = self.call("query_recent_turns", arguments)
            rows += [_row(r, session=session, type="turn") for r in page.get("turns", [])]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        return rows

    def recover(self, session: str) -> Recovered:
        found = self.call("recover_context", {"session": session, "turns": 1})
        handoff, summary = found.get("handoff"), found.get("summary")
        summary = _object(summary)
        return Recovered(_row(handoff) if isinstance(handoff, dict) else None, summary.get("summary"),
                         summary.get("ref"), summary.get("summary_source"))

    def recall(self, query: str, *, limit: int, project: str | None, type: str | None = None,
               session: str | None = None, full: bool = False) -> list[StoredRow]:
        arguments: dict[str, Any] = {"query": query, "limit": min(limit, RECALL_CAP)}
        if full:
            arguments["full_content"] = True
        if session is not None:
            arguments["session"] = session
        if project is not None:
            arguments["project_id"] = project
        if type is not None:
            arguments["type"] = type
        found = self.call("recall", arguments)
        if found.get("gate_fallback"):
            return []
        shared = {k: v for k, v in (found.get("shared") or {}).items() if k in ("session", "agent")}
        return [_row({**shared, **r}) for r in found.get("messages", []) if isinstance(r, dict)]

    def close(self) -> None:
        self._drop()


def _result(tool: str, status: int, kind: str, raw: bytes) -> dict[str, Any]:
    """The structured result of a tools/call response (JSON, or the SSE stream's answer)."""
    text = raw.decode("utf-8", "replace")
    if kind.startswith("text/event-stream"):
        events = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
        text = events[-1] if events else ""
    try:
        message = json.loads(text)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise SharedServerError(f"The shared memory-core server answered {tool} with HTTP {status} and no JSON-RPC.")
    if "error" in message:
        error = _object(message.get("error"))
        data = _object(error.get("data"))
        raise ToolError(str(data.get("code") or "SERVER_REFUSED"), str(error.get("message") or "refused"))
    result = _object(message.get("result"))
    structured = _object(result.get("structuredContent"))
    if result.get("isError"):
        error = _object(structured.get("error"))
        raise ToolError(str(error.get("code") or "TOOL_ERROR"), str(error.get("message") or "the tool failed"))
    return structured


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _row(data: dict[str, Any], **defaults: Any) -> StoredRow:
    """A row of an MCP answer (preview tier: defaults left out, content maybe a prefix)."""
    metadata = data.get("metadata")
    confidence = data.get("confidence")
    return StoredRow(
        ref=str(data.get("ref") or ""), content=str(data.get("content") or ""),
        type=str(data.get("type") or defaults.get("type") or "turn"), role=data.get("role"),
        session=data.get("session") or defaults.get("session"), agent=data.get("agent"),
        project_id=data.get("project_id"), visibility=str(data.get("visibility") or "tenant"),
        timestamp=data.get("timestamp"), metadata=metadata if isinstance(metadata, dict) else {},
        confidence=float(confidence) if isinstance(confidence, int | float) else None,
        truncated=bool(data.get("content_truncated")),
        # recall rows leave out provenance "agent" and empty flags (the preview tier's defaults)
        stored_provenance=str(data.get("provenance") or "agent"),
        stored_flags=tuple(str(f) for f in data.get("flags") or () if isinstance(f, str)))


def open_hook_store(settings: Settings | None, data_dir: Path, config: Path | None, binding: Binding, scope: str,
                    *, mode: str, deadline: float) -> HookStore:
    """The store the hook acts on (see the module docstring); coded errors when it cannot be had in time.

    ``settings`` are needed (and loaded by the caller) only for ``direct``."""
    if mode == "direct":
        from memory_core import MemoryCore

        if settings is None:
            raise StoreUnavailableError("The direct hook store needs the settings loaded.")
        core = MemoryCore.open(data_dir, settings=settings, announcement=ANNOUNCEMENT)
        return DirectStore(core, binding, owns=True)
    server = live_announcement(data_dir) or _start_within(data_dir, config, deadline)
    return SharedStore(server, binding, scope, deadline=deadline)


def _start_within(data_dir: Path, config: Path | None, deadline: float) -> Announcement:
    """Find or start the directory's shared server, waiting no longer than the hook may (it keeps
    starting, detached, for the events that follow)."""
    outcome: list[Announcement | MemoryCoreError] = []

    def start() -> None:
        try:
            outcome.append(ensure_shared_server(data_dir, config, say=None))
        except MemoryCoreError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=start, name="memory-core-hook-start", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if not outcome:
        raise SharedServerError(f"The shared memory-core server for {data_dir} did not start in the hook's time "
                                "(hooks.timeout_s); it goes on starting for the next event.")
    found = outcome[0]
    if isinstance(found, MemoryCoreError):
        raise found
    return found
