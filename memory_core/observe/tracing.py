"""OpenTelemetry traces: a span per tool call, a child span per stage, exported over OTLP/HTTP.

Built only with ``tracing.enabled`` (then this module, the SDK and the exporter load: the ``otel``
extra); a process without it makes no span of its own and installs no provider. The MCP SDK already
opens a server span per request (``tools/call <tool>``, continuing the caller's ``traceparent`` from
``_meta``) on the global tracer provider, which :meth:`Tracing.start` sets: a call's span is that one,
with memory-core's attributes added, and its stages become its children. The stages' durations are
measured (:mod:`memory_core.recall.stages`); their starts are derived: the calling thread's stages
back to back, ending when the service call returned, and the branch workers' (``lexical``,
``entities``) starting with ``embed``, beside which they ran.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memory_core.errors import ConfigError
from memory_core.observe.calls import CallRecord
from memory_core.observe.logs import TenantMode, tenant_label

try:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
except ImportError as exc:  # the otel extra is not installed
    _MISSING: ImportError | None = exc
else:
    _MISSING = None

if TYPE_CHECKING:
    from memory_core.settings.schema import TracingSettings

EXPORT_TIMEOUT_S = 5
FLUSH_MS = 3000  # what a stopping server gives the spans still buffered
BESIDE = frozenset({"lexical", "entities"})  # recall's branch workers (memory_core.recall.stages.BESIDE)
log = logging.getLogger(__name__)


class Tracing:
    """The tracer of memory-core's spans and the provider that exports them."""

    def __init__(self, provider: TracerProvider, version: str) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("memory-core", version)

    @classmethod
    def start(cls, settings: TracingSettings, *, version: str) -> Tracing:
        """A provider exporting to ``settings.endpoint`` (else the OTEL_* variables), made the global one."""
        if _MISSING is not None:
            raise ConfigError(
                "tracing.enabled needs OpenTelemetry's SDK and its OTLP/HTTP exporter, which are not installed "
                f"({_MISSING.name or _MISSING}); install them with pip install 'memory-core[otel]' or turn "
                "tracing off.", key="tracing.enabled")
        resource = Resource.create({SERVICE_NAME: settings.service_name, SERVICE_VERSION: version})
        provider = TracerProvider(resource=resource, sampler=ParentBased(TraceIdRatioBased(settings.sample_ratio)))
        # a collector that is down costs a stopping server EXPORT_TIMEOUT_S at most, never a hang
        exporter = OTLPSpanExporter(endpoint=settings.endpoint, timeout=EXPORT_TIMEOUT_S) if settings.endpoint \
            else OTLPSpanExporter(timeout=EXPORT_TIMEOUT_S)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        trace.set_tracer_provider(provider)  # the MCP SDK's per-request spans go through it too
        if trace.get_tracer_provider() is not provider:  # set once per process: a second server keeps the first
            log.warning("another tracer provider was set first; the MCP SDK's spans go there")
        return cls(provider, version)

    def record(self, record: CallRecord, tenant_mode: TenantMode) -> None:
        """Annotate the call's span (the SDK's, else one of our own) and add its stages as children."""
        span = trace.get_current_span()
        own = not span.is_recording()
        if own:
            span = self.tracer.start_span(f"memory_core {record.tool}", start_time=record.started_ns)
        span.set_attribute("memory_core.request_id", record.request_id)
        span.set_attribute("memory_core.tool", record.tool)
        span.set_attribute("memory_core.outcome", record.outcome)
        tenant = tenant_label(record.tenant, tenant_mode)
        if tenant is not None:
            span.set_attribute("memory_core.tenant", tenant)
        for kind, ms in record.waits_ms.items():
            span.set_attribute(f"memory_core.wait.{kind}_ms", round(ms, 3))
        if record.stages_ms and record.stages_end_ns:
            self._stages(span, record)
        if own:
            span.end(end_time=record.started_ns + int(record.elapsed_s * 1e9))

    def _stages(self, parent: trace.Span, record: CallRecord) -> None:
        context = trace.set_span_in_context(parent)
        main = [(k, v) for k, v in record.stages_ms.items() if k not in BESIDE and k != "rerank"]
        at = record.stages_end_ns - int(sum(ms for _k, ms in main) * 1e6)
        starts: dict[str, int] = {}
        for stage, ms in main:
            starts[stage] = at
            self._child(context, record, stage, at, ms)
            at += int(ms * 1e6)
        beside_start = starts.get("embed", starts.get("vector", record.started_ns))
        for stage, ms in record.stages_ms.items():
            if stage in BESIDE:
                self._child(context, record, stage, beside_start, ms)
            elif stage == "rerank" and "rank" in starts:  # reranking runs inside ranking
                self._child(context, record, stage, starts["rank"], ms)

    def _child(self, context: object, record: CallRecord, stage: str, start_ns: int, ms: float) -> None:
        span = self.tracer.start_span(f"{record.stage_op or record.tool}.{stage}", context=context,  # type: ignore[arg-type]
                                      start_time=start_ns)
        span.set_attribute("memory_core.stage", stage)
        span.end(end_time=start_ns + int(ms * 1e6))

    def close(self) -> None:
        """Export what is buffered (for at most ``FLUSH_MS``), then stop exporting."""
        self.provider.force_flush(timeout_millis=FLUSH_MS)
        self.provider.shutdown()
