"""Observability: what a serving process measures, logs and traces about itself, and how.

The domain records into plain instruments that cost next to nothing and import nothing:

- :mod:`memory_core.observe.tally` — :class:`Tally`, a bucketed count of durations or sizes (the
  writer lock's waits, group commit's batch sizes and queue waits), read when metrics are scraped;
- :mod:`memory_core.observe.timed_lock` — :class:`TimedRLock`, the writer lock: it tallies how long
  each acquire waited and knows what holds it (a repair says so), which ``/readyz`` reads;
- :mod:`memory_core.observe.calls` — the tool call in progress (a context variable): its stages and
  waits, noted by whatever code it runs, for its log line and its trace.

A server (:mod:`tools.serve`) turns them into the outputs an operator reads, each built only when
configured, so that off means free:

- :mod:`memory_core.observe.metrics` — Prometheus metrics on a registry of its own (the only module
  that imports ``prometheus_client``);
- :mod:`memory_core.observe.logs` — text or JSON-lines logging; a tool call's line carries ids, codes
  and timings, never content;
- :mod:`memory_core.observe.tracing` — OpenTelemetry spans over OTLP (the only module that imports
  ``opentelemetry``; the ``otel`` extra);
- :mod:`memory_core.observe.observer` — :class:`Observer`, what the MCP boundary calls around each
  tool call to feed all three.

The boundaries (``tools/``) import observability through this package's names only, pinned by
``tests/test_public_api.py`` as ``memory_core``'s and ``memory_core.operator``'s are. The names whose
modules import a library of their own (``Metrics``: prometheus-client) load on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memory_core.observe.calls import CallRecord, current_call, note_stage, note_wait, request_id_var
from memory_core.observe.tally import Tally, TallySnapshot
from memory_core.observe.timed_lock import TimedRLock

if TYPE_CHECKING:
    from memory_core.observe.logs import configure as configure_logs
    from memory_core.observe.logs import log_event
    from memory_core.observe.metrics import Metrics
    from memory_core.observe.observer import Observer, new_request_id

# name -> (its module, the name it has there)
_LAZY = {
    "Metrics": ("memory_core.observe.metrics", "Metrics"),
    "Observer": ("memory_core.observe.observer", "Observer"),
    "new_request_id": ("memory_core.observe.observer", "new_request_id"),
    "configure_logs": ("memory_core.observe.logs", "configure"),
    "log_event": ("memory_core.observe.logs", "log_event"),
}

__all__ = [
    "CallRecord",
    "Metrics",
    "Observer",
    "Tally",
    "TallySnapshot",
    "TimedRLock",
    "configure_logs",
    "current_call",
    "log_event",
    "new_request_id",
    "note_stage",
    "note_wait",
    "request_id_var",
]


def __getattr__(name: str) -> Any:
    from memory_core.heavy_imports import lazy_name

    return lazy_name(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
