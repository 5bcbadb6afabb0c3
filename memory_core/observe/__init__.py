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
"""

from memory_core.observe.calls import CallRecord, current_call, note_stage, note_wait
from memory_core.observe.tally import Tally
from memory_core.observe.timed_lock import TimedRLock

__all__ = ["CallRecord", "Tally", "TimedRLock", "current_call", "note_stage", "note_wait"]
