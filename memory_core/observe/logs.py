"""Logging for a serving process: text for a terminal, or JSON lines for a collector.

:func:`configure` installs one handler on stderr (stdout is the protocol over stdio). ``logs.level``
applies to memory-core's own loggers (``memory_core``, ``tools``, ``graph``); other libraries stay at
WARNING whatever it says, because their debug output can quote requests — and a request holds content.

A tool call logs one line at INFO on the logger named "memory_core.calls" (:func:`call_fields`): the request id, the
tool, the tenant (hashed unless ``logs.tenant = "plain"``), the outcome code and the timings — never
an argument, a result or a message text. In JSON an exception is its type and its stack (file, line,
function), without its message, which may quote input.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
import time
import traceback
from typing import IO, Any, Literal

from memory_core.observe.calls import CallRecord

OWN_LOGGERS = ("memory_core", "tools", "graph")
CALLS = logging.getLogger("memory_core.calls")
TenantMode = Literal["hash", "plain", "omit"]
_FIELDS = "memory_core_fields"  # the LogRecord attribute holding a line's structured fields


def tenant_label(tenant: str | None, mode: TenantMode) -> str | None:
    """How a tenant appears in a log line or a span: a sha256 prefix (``h:…``), as is, or not at all."""
    if tenant is None or mode == "omit":
        return None
    if mode == "plain":
        return tenant
    return "h:" + hashlib.sha256(tenant.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def call_fields(record: CallRecord, tenant_mode: TenantMode) -> dict[str, Any]:
    """The fields of a tool call's log line: ids, codes and milliseconds only."""
    fields: dict[str, Any] = {"event": "tool_call", "request_id": record.request_id, "tool": record.tool}
    tenant = tenant_label(record.tenant, tenant_mode)
    if tenant is not None:
        fields["tenant"] = tenant
    fields["outcome"] = record.outcome
    fields["ms"] = round(record.elapsed_s * 1000, 2)
    if record.stages_ms:
        fields["stages_ms"] = {k: round(v, 2) for k, v in record.stages_ms.items()}
    if record.waits_ms:
        fields["waits_ms"] = {k: round(v, 2) for k, v in record.waits_ms.items()}
    return fields


def log_call(record: CallRecord, tenant_mode: TenantMode) -> None:
    """One INFO line for a finished tool call (nothing is built when INFO is off)."""
    if CALLS.isEnabledFor(logging.INFO):
        fields = call_fields(record, tenant_mode)
        text = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in fields.items() if k != "event")
        CALLS.info("tool call %s", text, extra={_FIELDS: fields})


def log_event(logger: logging.Logger, fields: dict[str, Any]) -> None:
    """One INFO line of structured ``fields`` (``event`` names it): keys of their own in JSON logs, ``k=v``
    in text. Background work (the consolidation schedule) logs what it did this way: ids and counts, no content."""
    if logger.isEnabledFor(logging.INFO):
        text = " ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in fields.items() if k != "event")
        logger.info("%s %s", fields.get("event", ""), text, extra={_FIELDS: fields})


class JsonLines(logging.Formatter):
    """One JSON object a line: ``ts``, ``level``, ``logger``, ``message`` and a line's own fields."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, _FIELDS, None)
        line: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        if fields is not None:
            line.update(fields)
        else:
            line["message"] = record.getMessage()
        if record.exc_info and record.exc_info[0] is not None:
            exc_type, _exc, tb = record.exc_info
            line["exc_type"] = f"{exc_type.__module__}.{exc_type.__qualname__}"
            line["stack"] = [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_tb(tb)]
        return json.dumps(line, ensure_ascii=False, default=str)


_HANDLER_MARK = "memory_core_handler"


def configure(fmt: Literal["text", "json"], level: str, *, stream: IO[str] | None = None) -> logging.Handler:
    """Send logging to ``stream`` (stderr) as ``fmt``; memory-core's loggers at ``level``, others at WARNING.

    Calling it again replaces the handler it installed before (and nothing else's).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLines() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    setattr(handler, _HANDLER_MARK, True)
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, _HANDLER_MARK, False)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    own = getattr(logging, level.upper())
    for name in OWN_LOGGERS:
        logging.getLogger(name).setLevel(own)
    return handler
