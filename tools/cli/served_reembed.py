"""``memory-core reembed`` through the data directory's running server (tools/serve/reembed_route.py).

When a server holds the directory (its record is there and it proves it holds the record's secret), the
command cannot open the store: it asks that server, with an operator token minted from the record, to run
the re-embed in its own process, polls the server's progress into the progress bar and returns the report.
The server goes on answering its clients meanwhile and switches to the new model at the end.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memory_core import MemoryCoreError, StoreUnavailableError
from tools.server_record import REEMBED_PATH, Announcement, operator_token

POLL_S = 0.5
TIMEOUT_S = 30.0  # one request's (a poll's); the run itself takes as long as it takes


class ServedError(MemoryCoreError):
    """A re-embed the server ran and failed with a code this process has no class for; ``code`` is the server's."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def served_error(code: str, message: str) -> MemoryCoreError:
    """The server's coded error as this process's own class of that code (so the exit code is the same as a
    run of its own would give), else a :class:`ServedError`."""
    todo: list[type[MemoryCoreError]] = [MemoryCoreError]
    while todo:
        cls = todo.pop()
        if cls.code == code:
            try:
                return cls(message)
            except TypeError:  # a class that needs more than its message
                break
        todo.extend(cls.__subclasses__())
    return ServedError(code, message)


def running_server(data_dir: Path) -> Announcement | None:
    """The live server of ``data_dir`` that proved it holds its record's secret; None when there is none."""
    from tools.bridge.locate import live_announcement

    return live_announcement(data_dir)


def reembed_on_server(server: Announcement, model: str, model_path: str | None,
                      progress: Callable[[str, int, int], None], *, poll_s: float = POLL_S) -> dict[str, Any]:
    """Start (or join) the server's re-embed to ``model`` and wait for it; the report (its JSON), or the run's
    coded error. A server that stops meanwhile is STORE_UNAVAILABLE: the build resumes on the next run."""
    token = operator_token(server.secret)
    status, body = _request(server, token, "POST", {"model": model, "model_path": model_path})
    if status == 409:
        raise served_error("INVALID_INPUT", f"The server is re-embedding to {body.get('model')!r} already; "
                                           "wait for it to end.")
    while True:
        if status >= 400 and "error" in body and "state" not in body:
            raise served_error(str(body["error"].get("code", "STORE_ERROR")), str(body["error"].get("message")))
        shown = body.get("progress") or {}
        if shown.get("total"):
            progress(str(shown.get("what")), int(shown.get("done", 0)), int(shown["total"]))
        if body.get("state") == "done":
            return dict(body["report"])
        if body.get("state") == "failed":
            error = body.get("error") or {}
            raise served_error(str(error.get("code", "STORE_ERROR")),
                               str(error.get("message", "The re-embed failed.")))
        time.sleep(poll_s)
        status, body = _request(server, token, "GET", None)


def _request(server: Announcement, token: str, method: str, payload: dict[str, Any] | None) -> tuple[int, Any]:
    host, port = server.address
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        conn.request(method, REEMBED_PATH, body=None if payload is None else json.dumps(payload),
                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"{}")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        raise StoreUnavailableError(f"The server at {server.url} (pid {server.pid}) stopped answering during the "
                                    "re-embed; run the command again to resume the build.") from exc
    finally:
        conn.close()
