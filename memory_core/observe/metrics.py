"""Prometheus metrics for a serving process, on a registry of its own (``prometheus_client``).

What ``/metrics`` holds (every name starts ``memory_core_``):

- ``tool_calls_total{tool, outcome}`` — tool calls by outcome (``ok`` or the error code);
  ``errors_total{code}`` — the same errors summed by code, whatever the tool;
- ``tool_duration_seconds{tool}`` — each call's wall time; ``stage_duration_seconds{op, stage}`` —
  a recall's stages (``read``, ``embed``, ``vector``, ``lexical``, ``entities``, ``wait``, ``rank``,
  ``rerank``: :mod:`memory_core.recall.stages`);
- ``group_commit_batch_size``, ``group_commit_queue_wait_seconds``, ``writer_lock_wait_seconds`` —
  read from the domain's own tallies (:class:`memory_core.observe.tally.Tally`) when scraped;
- ``store_rows{store}`` — memories in the graph and records in the vector store (counted at most
  every ``metrics.store_counts_s``); ``shared_clients`` — stdio clients bridged to this server;
  ``http_responses_total{route, status}``; ``ready`` (what ``/readyz`` says, as 1 or 0);
- ``rows_total{outcome}`` — rows the write path answered: ``stored``, ``retry`` (an idempotent add answered
  with its first row) or why write-time hygiene did not store it (``empty``, ``acknowledgement``,
  ``heartbeat``, ``bookkeeping``, ``repeat``); ``flagged_rows_total{flag}`` — rows stored with a poisoning
  flag, by flag (a rejected one is an error: ``errors_total{code="POISONING_REJECTED"}``);
- ``consolidation_merges_total``, ``consolidation_runs_total{outcome}`` — what the background
  consolidation schedule did (:mod:`memory_core.operator.schedule`; zero while it is off);
- ``build_info{version}``, and the process's own (``process_resident_memory_bytes``,
  ``process_open_fds``, CPU seconds) from the client library's process collector.

Cardinality is bounded: tool names come from the registry (anything else is ``_unknown``), codes and
stages from the code, and tenant labels appear only with ``metrics.tenant_labels`` > 0, for that many
tenants at most (the first seen; the rest share ``_other``). Recording costs a few microseconds a
call (``bench/latency/observe.py`` measures it against a call with metrics off).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from memory_core.observe.calls import CallRecord
from memory_core.observe.tally import SECONDS, TallySnapshot

PREFIX = "memory_core_"
UNKNOWN_TOOL = "_unknown"
OTHER_TENANT = "_other"
NO_TENANT = "_none"

TallySource = Callable[[], TallySnapshot | None]
GaugeSource = Callable[[], Iterable[tuple[Sequence[str], float]]]


class TenantLabels:
    """At most ``cap`` tenants get a label of their own (the first seen); every other one is ``_other``."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, tenant: str | None) -> str:
        if tenant is None:
            return NO_TENANT
        with self._lock:
            if tenant in self._seen:
                return tenant
            if len(self._seen) < self.cap:
                self._seen.add(tenant)
                return tenant
        return OTHER_TENANT


@dataclass(frozen=True)
class _Pulled:
    name: str
    help: str
    labels: tuple[str, ...]
    read: GaugeSource | TallySource
    kind: Literal["histogram", "gauge", "counter"]


class _PulledCollector(Collector):
    """Values read from their owners when scraped (the domain's tallies, store counts, client counts)."""

    def __init__(self) -> None:
        self.sources: list[_Pulled] = []

    def collect(self) -> Iterator[Metric]:
        for source in self.sources:
            if source.kind == "histogram":
                snap = source.read()
                if snap is None or not isinstance(snap, TallySnapshot):
                    continue
                family = HistogramMetricFamily(source.name, source.help)
                buckets = [(_bound(b), float(c)) for b, c in zip(snap.bounds, snap.cumulative, strict=True)]
                family.add_metric([], buckets, snap.total)
                yield family
            else:
                values: GaugeMetricFamily | CounterMetricFamily = (
                    GaugeMetricFamily if source.kind == "gauge" else CounterMetricFamily)(
                    source.name, source.help, labels=list(source.labels))
                for labels, value in source.read() or ():  # type: ignore[union-attr]
                    values.add_metric(list(labels), value)
                yield values


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class Metrics:
    """The metrics of one serving process; :meth:`render` is the body of ``/metrics``."""

    def __init__(self, *, tools: Collection[str], tenant_labels: int = 0, version: str = "0+unknown") -> None:
        disable_created_metrics()  # the library's switch: no *_created series beside each counter and histogram
        self.registry = CollectorRegistry(auto_describe=True)
        self._tools = frozenset(tools)
        self.tenants = TenantLabels(tenant_labels) if tenant_labels > 0 else None
        by_tenant = ("tenant",) if self.tenants is not None else ()
        reg = self.registry
        self._calls = Counter(PREFIX + "tool_calls", "Tool calls by tool and outcome (ok, or the error code).",
                              ("tool", "outcome", *by_tenant), registry=reg)
        self._errors = Counter(PREFIX + "errors", "Tool calls that answered an error, by code.", ("code",),
                               registry=reg)
        self._latency = Histogram(PREFIX + "tool_duration_seconds", "Wall time of a tool call.", ("tool",),
                                  buckets=SECONDS, registry=reg)
        self._stages = Histogram(PREFIX + "stage_duration_seconds", "Wall time of a stage of a call (recall's: "
                                 "read, embed, vector, lexical, entities, wait, rank, rerank).", ("op", "stage"),
                                 buckets=SECONDS, registry=reg)
        self._http = Counter(PREFIX + "http_responses", "HTTP responses by route and status.", ("route", "status"),
                             registry=reg)
        self._merges = Counter(PREFIX + "consolidation_merges", "Canonical memories the background consolidation "
                               "schedule wrote (consolidation.every_s).", registry=reg)
        self._runs = Counter(PREFIX + "consolidation_runs", "Background consolidation runs by outcome (ok, failed).",
                             ("outcome",), registry=reg)
        self._ready = Gauge(PREFIX + "ready", "1 while /readyz answers 200, else 0.", registry=reg)
        Gauge(PREFIX + "build_info", "The memory-core version serving.", ("version",), registry=reg).labels(
            version).set(1)
        ProcessCollector(registry=reg)  # process_resident_memory_bytes, process_open_fds, CPU seconds
        self._pulled = _PulledCollector()
        reg.register(self._pulled)
        self._children: dict[tuple[object, ...], Any] = {}  # labelled children, looked up once (bounded labels)

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    # ---- pushed: one call at a time -----------------------------------------------------------
    def record_call(self, record: CallRecord) -> None:
        """Count one finished tool call, its latency and its stages."""
        tool = record.tool if record.tool in self._tools else UNKNOWN_TOOL
        labels = (tool, record.outcome) if self.tenants is None else (tool, record.outcome, self.tenants(record.tenant))
        self._child(self._calls, *labels).inc()
        if record.outcome != "ok":
            self._child(self._errors, record.outcome).inc()
        self._child(self._latency, tool).observe(record.elapsed_s)
        if record.stage_op is not None:
            for stage, ms in record.stages_ms.items():
                self._child(self._stages, record.stage_op, stage).observe(ms / 1000)

    def record_http(self, route: str, status: int) -> None:
        self._child(self._http, route, str(status)).inc()

    def record_consolidation(self, merges: int, ok: bool) -> None:
        """Count one background consolidation run and the merges it wrote."""
        self._merges.inc(merges)
        self._child(self._runs, "ok" if ok else "failed").inc()

    def set_ready(self, ready: bool) -> None:
        self._ready.set(1 if ready else 0)

    # ---- pulled: read when scraped ------------------------------------------------------------
    def watch_tally(self, name: str, help_text: str, read: TallySource) -> None:
        """A histogram read from a :class:`~memory_core.observe.tally.Tally` at each scrape (None: absent)."""
        self._pulled.sources.append(_Pulled(PREFIX + name, help_text, (), read, "histogram"))

    def watch_gauge(self, name: str, help_text: str, labels: Sequence[str], read: GaugeSource) -> None:
        """A gauge whose labelled values are read at each scrape."""
        self._pulled.sources.append(_Pulled(PREFIX + name, help_text, tuple(labels), read, "gauge"))

    def watch_counter(self, name: str, help_text: str, labels: Sequence[str], read: GaugeSource) -> None:
        """A counter whose labelled totals are read at each scrape (``name`` without ``_total``)."""
        self._pulled.sources.append(_Pulled(PREFIX + name, help_text, tuple(labels), read, "counter"))

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition and its content type, in the format ``accept`` asks for (a scraper's Accept header):
        OpenMetrics, Prometheus text 1.0.0, else Prometheus text 0.0.4 (what any Prometheus reads)."""
        encode, content_type = choose_encoder(accept)
        return encode(self.registry), content_type
