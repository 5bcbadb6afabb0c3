"""What the MCP boundary calls around each tool call: one record, fed to metrics, the log and a trace.

:class:`Observer` is built once by the serving process from its settings
(:meth:`Observer.from_settings`); each output exists only when configured — no metrics object without
``metrics.enabled``, no tracer without ``tracing.enabled`` (and then ``opentelemetry`` is imported, not
before) — so what is off costs a record and a few clock reads a call.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from memory_core.observe import calls
from memory_core.observe.calls import CallRecord
from memory_core.observe.logs import TenantMode, log_call

if TYPE_CHECKING:
    from memory_core.observe.metrics import Metrics
    from memory_core.observe.tracing import Tracing
    from memory_core.settings.schema import Settings


def new_request_id() -> str:
    return secrets.token_hex(8)


class Observer:
    """Metrics, the call log line and spans for each tool call (each optional)."""

    def __init__(self, *, metrics: Metrics | None = None, tracing: Tracing | None = None,
                 tenant_mode: TenantMode = "hash") -> None:
        self.metrics = metrics
        self.tracing = tracing
        self.tenant_mode = tenant_mode

    @classmethod
    def from_settings(cls, settings: Settings, *, tools: Collection[str], version: str,
                      serves_metrics: bool = True) -> Observer:
        """The outputs ``settings`` turn on (``[metrics]``, ``[tracing]``, ``[logs]``); ``serves_metrics``
        False: a process without an HTTP listener (stdio) keeps none."""
        metrics = tracing = None
        if settings.metrics.enabled and serves_metrics:
            from memory_core.observe.metrics import Metrics  # prometheus_client loads only when metrics are on

            metrics = Metrics(tools=tools, tenant_labels=settings.metrics.tenant_labels, version=version)
        if settings.tracing.enabled:
            from memory_core.observe.tracing import Tracing  # opentelemetry loads only when tracing is on

            tracing = Tracing.start(settings.tracing, version=version)
        return cls(metrics=metrics, tracing=tracing, tenant_mode=settings.logs.tenant)

    @contextmanager
    def call(self, tool: str, tenant: str | None) -> Iterator[CallRecord]:
        """Time one tool call; the caller sets ``outcome`` on the record it gets before leaving."""
        record = CallRecord(tool, calls.request_id_var.get() or new_request_id(), tenant)
        token = calls.begin(record)
        try:
            yield record
        finally:
            calls.end(token)
            record.elapsed_s = time.perf_counter() - record.started
            self.finish(record)

    def finish(self, record: CallRecord) -> None:
        if self.metrics is not None:
            self.metrics.record_call(record)
        if self.tracing is not None:
            self.tracing.record(record, self.tenant_mode)
        log_call(record, self.tenant_mode)

    def close(self) -> None:
        """Flush what is buffered (spans) before the process ends; a second call does nothing."""
        tracing, self.tracing = self.tracing, None
        if tracing is not None:
            tracing.close()

