"""The background consolidation schedule of a serving process (``consolidation.every_s``; 0, the default: off).

When on, a daemon thread wakes every ``every_s`` seconds and runs the same consolidation as ``memory-core
consolidate`` over every tenant (:mod:`memory_core.operator.consolidation`: the same plan, the same
canonical versions, the same undo), with two differences that keep a serving store answering:

- it writes ONE merge per write-path call, so it holds the writer lock for one canonical at a time
  (agents' writes wait for at most one merge, never for a tenant's run);
- with ``consolidation.model_canonical``, the model writes each canonical's text before its merge takes
  the lock (:mod:`memory_core.operator.canonical`);
- it checks between merges whether the server is stopping, and :meth:`ConsolidationSchedule.stop` waits
  for the merge in progress (crash-safe anyway: a kill mid-merge is what a killed CLI run leaves).

Each merge is logged as one INFO line (``event: consolidation_merge``: the tenant as ``logs.tenant``
says, the canonical's ref, the merged refs; never content), each run as ``consolidation_run``. A run
that fails (a store down, a bug) logs ``consolidation_failed`` with the exception's type and waits for
the next: the schedule never stops on an error, and never takes the server down.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from memory_core.observe.logs import TenantMode, log_event, tenant_label
from memory_core.operator.canonical import ModelCanonical
from memory_core.operator.consolidation import ConsolidationReport, plan_tenant, write_merges
from memory_core.operator.retention import finish_archive
from memory_core.refs import memory_ref

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

log = logging.getLogger(__name__)
RunHook = Callable[[int, bool], None]  # (merges written, whether the run finished without an error)


class ConsolidationSchedule:
    """Consolidates every tenant every ``every_s`` seconds on a thread of its own, until :meth:`stop`.

    ``parts_of`` gives the store's operator parts, or None while the stores are not open yet (that
    wake-up is skipped); ``on_run`` is told each run's merges and outcome (the server's metrics)."""

    def __init__(self, parts_of: Callable[[], OperatorParts | None], every_s: float, *,
                 tenant_mode: TenantMode = "hash", on_run: RunHook | None = None) -> None:
        if every_s <= 0:
            raise ValueError("a consolidation schedule needs every_s > 0 (0 means: no schedule)")
        self.parts_of = parts_of
        self.every_s = every_s
        self.tenant_mode = tenant_mode
        self.on_run = on_run
        self.runs = 0  # finished runs, failed or not (tests and /readyz-like probes read it)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once); its first run is ``every_s`` after now."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="memory-core-consolidation", daemon=True)
            self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Ask the thread to stop and wait for the merge in progress (at most ``timeout_s``)."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stopping.wait(self.every_s):
            parts = self.parts_of()
            if parts is None:
                continue
            self.run_once(parts)

    def run_once(self, parts: OperatorParts) -> ConsolidationReport:
        """One run over every tenant, one merge per writer-lock hold; an error is logged, never raised."""
        report = ConsolidationReport(dry_run=False)
        started = time.monotonic()
        ok = True
        try:
            for tenant in sorted(parts.maintenance.tenants_present()):
                if self._stopping.is_set():
                    break
                self._tenant(parts, tenant, report)
        except Exception as exc:  # a failed run waits for the next; the server goes on
            ok = False
            kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
            log_event(log, {"event": "consolidation_failed", "error": kind, "code": getattr(exc, "code", None),
                            "merges": len(report.merges)})
            log.debug("the consolidation run failed", exc_info=True)
        self.runs += 1
        log_event(log, {"event": "consolidation_run", "ok": ok, "merges": len(report.merges),
                        "rows_retired": report.rows_retired, "skipped": len(report.skipped),
                        "ms": round((time.monotonic() - started) * 1000, 1)})
        if self.on_run is not None:
            self.on_run(len(report.merges), ok)
        return report

    def _tenant(self, parts: OperatorParts, tenant: str, report: ConsolidationReport) -> None:
        rewrite = ModelCanonical.from_settings(parts.settings).rewrite \
            if parts.settings.consolidation.model_canonical else None
        report.finished += finish_archive(parts, tenant)
        scanned, merges = plan_tenant(parts, tenant)
        report.scanned[tenant] = scanned
        label = tenant_label(tenant, self.tenant_mode)
        for merge in merges:
            if self._stopping.is_set():
                return
            done = len(report.merges)
            write_merges(parts, [merge], report, rewrite=rewrite)  # one canonical per writer-lock hold
            for written, ref in report.merges[done:]:
                fields = {"event": "consolidation_merge", "canonical": ref,
                          "merged": [memory_ref(r.node.id) for r in written.members]}
                log_event(log, {**fields, "tenant": label} if label is not None else fields)
