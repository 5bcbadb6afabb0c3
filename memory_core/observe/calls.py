"""The tool call in progress: a context variable the boundary sets and any code below may note into.

The MCP boundary starts a :class:`CallRecord` around each tool call
(:meth:`memory_core.observe.observer.Observer.call`); code the call runs — on the event loop or on
the worker thread it was handed to, which inherits the context — notes its stages (recall's
``embed``, ``vector``, ``rank``…) and its waits (group commit's queue, the writer lock). Outside a
call (the CLI, library callers, background workers) there is no record and a note costs one
context-variable read. Nothing here records content: names, codes and milliseconds only.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field

_current: ContextVar[CallRecord | None] = ContextVar("memory_core_call", default=None)
request_id_var: ContextVar[str | None] = ContextVar("memory_core_request_id", default=None)


@dataclass
class CallRecord:
    """One tool call: what it was, for whom, how it ended and where its time went."""

    tool: str
    request_id: str
    tenant: str | None = None
    started: float = field(default_factory=time.perf_counter)
    started_ns: int = field(default_factory=time.time_ns)  # wall clock, for spans
    stages_ms: dict[str, float] = field(default_factory=dict)  # in the order they ran (recall's, see recall.stages)
    stage_op: str | None = None  # what the stages time ("recall"), for their metric's label
    stages_end_ns: int = 0  # wall clock when the timed work returned (a trace lays the stages before it)
    waits_ms: dict[str, float] = field(default_factory=dict)  # "group_commit", "writer_lock"
    outcome: str = "ok"  # "ok" or the error code the call answered with
    elapsed_s: float = 0.0


def current_call() -> CallRecord | None:
    """The tool call this code runs for, if any."""
    return _current.get()


def note_stage(op: str, stages_ms: Mapping[str, float]) -> None:
    """The current call's stages (wall ms each, in order), e.g. a recall's ``diagnostics["stages_ms"]``."""
    record = _current.get()
    if record is not None:
        record.stage_op = op
        record.stages_end_ns = time.time_ns()
        for stage, ms in stages_ms.items():
            record.stages_ms[stage] = record.stages_ms.get(stage, 0.0) + float(ms)


def note_wait(kind: str, seconds: float) -> None:
    """The current call waited ``seconds`` for ``kind`` (a lock, a batch): summed per kind."""
    record = _current.get()
    if record is not None:
        record.waits_ms[kind] = record.waits_ms.get(kind, 0.0) + seconds * 1000


def begin(record: CallRecord) -> object:
    """Make ``record`` the current call; returns the token :func:`end` takes."""
    return _current.set(record)


def end(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]
