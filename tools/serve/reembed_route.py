"""``REEMBED_PATH``: the directory owner's ``memory-core reembed`` run by the serving process itself.

A running server holds its data directory (the embedded store's lock), so the command cannot open the
store beside it. Instead it asks the server, with an operator token only the owner of the directory can mint
(:func:`tools.server_record.operator_token`), to run the re-embed on a thread of its own
(:func:`memory_core.operator.reembed` over the server's core): the new index is built while the server goes
on answering recalls and writes with the old one, then the core switches to the new model and index in
place (:mod:`memory_core.vectors.switch`).

- ``POST`` ``{"model", "model_path"?}`` starts the run (202), or answers the one under way (409 when it is
  for another model);
- ``GET`` answers the run's state: ``{"state": "idle" | "running" | "done" | "failed", "model",
  "progress": {"what", "done", "total"}, "report"?, "error"?: {"code", "message"}}``.

One run at a time per server; the last one's state stays readable until the next starts. While one runs
(and for ``KEEP_S`` after, so the command reads its report) the shared server does not stop when idle.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp, Receive, Scope, Send

from memory_core import MemoryCoreError
from tools.serve.bridged import bearer
from tools.serve.probes import reply
from tools.server_record import REEMBED_PATH, is_operator_token

if TYPE_CHECKING:
    from tools.mcp.stores import Stores

MAX_BODY = 4096
KEEP_S = 30.0  # a finished run keeps the shared server up this long: the command's next poll reads the report
log = logging.getLogger(__name__)


class ReembedJob:
    """One re-embed run on a thread of the server, and what a poll reads of it."""

    def __init__(self, model: str, model_path: str | None) -> None:
        self.model, self.model_path = model, model_path
        self.state = "running"
        self.progress: dict[str, Any] = {}
        self.report: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.ended: float | None = None

    def view(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.state, "model": self.model, "progress": self.progress}
        if self.report is not None:
            out["report"] = self.report
        if self.error is not None:
            out["error"] = self.error
        return out

    def run(self, core: Any) -> None:
        """Build, switch and report (on its own thread); a failure is kept as a coded error."""
        from memory_core.operator import embedding_for, reembed

        def progress(what: str, done: int, total: int) -> None:
            self.progress = {"what": what, "done": done, "total": total}

        try:
            parts = core.operator_parts()
            shown, embedder = embedding_for(parts, self.model, self.model_path)
            report = reembed(parts, embedder, progress=progress)
            self.report = {**report.to_dict(), "settings": shown}
            self.state = "done"
        except MemoryCoreError as exc:
            self.error, self.state = {"code": exc.code, "message": exc.message}, "failed"
        except Exception as exc:  # a bug or a store failure: reported to the command, logged here in full
            log.exception("the re-embed failed")
            self.error = {"code": "STORE_ERROR", "message": f"The re-embed failed: {type(exc).__name__}: {exc}."}
            self.state = "failed"
        finally:
            self.ended = time.monotonic()


class ReembedRoute:
    """ASGI middleware answering :data:`REEMBED_PATH` (see the module docstring); the rest goes to ``app``."""

    def __init__(self, app: ASGIApp, stores: Stores, secret: str) -> None:
        self.app = app
        self._stores = stores
        self._secret = secret
        self._mutex = threading.Lock()
        self.job: ReembedJob | None = None

    def busy(self) -> bool:
        """True while a run goes on, and for :data:`KEEP_S` after it ended."""
        job = self.job
        return job is not None and (job.ended is None or time.monotonic() - job.ended < KEEP_S)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") != REEMBED_PATH:
            await self.app(scope, receive, send)
            return
        token = bearer(scope)
        if token is None or not is_operator_token(self._secret, token):
            await reply(send, 401, {"error": {"code": "UNAUTHORIZED",
                                              "message": "An operator token of this server's record is required."}})
            return
        if scope["method"] == "GET":
            await reply(send, 200, self.job.view() if self.job is not None else {"state": "idle"})
            return
        if scope["method"] != "POST":
            await reply(send, 405, {"error": {"code": "INVALID_INPUT", "message": "GET or POST."}}, allow="GET, POST")
            return
        request = await _body(receive)
        model = request.get("model") if isinstance(request, dict) else None
        path = request.get("model_path") if isinstance(request, dict) else None
        if not isinstance(model, str) or not model or not (path is None or isinstance(path, str)):
            await reply(send, 400, {"error": {"code": "INVALID_INPUT",
                                              "message": "POST {\"model\": …, \"model_path\"?: …} as JSON."}})
            return
        try:
            core = await self._stores.get()
        except MemoryCoreError as exc:
            await reply(send, 503, {"error": {"code": exc.code, "message": exc.message}})
            return
        with self._mutex:
            job, started = self.job, False
            if job is None or job.state != "running":
                self.job = job = ReembedJob(model, path)
                started = True
        if started:
            threading.Thread(target=job.run, args=(core,), name="memory-core-reembed", daemon=True).start()
        same = (job.model, job.model_path) == (model, path)
        await reply(send, 202 if same else 409, job.view())


async def _body(receive: Receive) -> Any:
    """The request's JSON body (None when it is not JSON or larger than :data:`MAX_BODY`)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            break
    try:
        return json.loads(b"".join(chunks)) if chunks else None
    except ValueError:
        return None
