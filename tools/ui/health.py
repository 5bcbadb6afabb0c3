"""The Health page's doctor check, run in the background so the page never waits for it.

A full check compares every Chroma record with the graph and the lexical index: seconds on a
large store, and it holds the write lock while it runs, as ``memory-core doctor`` does. So
the page shows the latest finished report with its age; viewing the page starts a new
check when none ran in the last ``max_age_s`` seconds, and the page refreshes itself while
one is running.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memory_core.operator import check_stores

if TYPE_CHECKING:
    from memory_core.operator import DoctorReport, OperatorParts

MAX_AGE_S = 600.0


@dataclass(frozen=True)
class CheckState:
    report: DoctorReport | None
    finished_at: float | None  # time.time() of the report
    duration_s: float | None
    running: bool
    error: str | None


class DoctorMonitor:
    def __init__(self, parts: OperatorParts, max_age_s: float = MAX_AGE_S) -> None:
        self.parts = parts
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._state = CheckState(None, None, None, False, None)

    def state(self, start_if_stale: bool = True) -> CheckState:
        """The latest state; starts a check in the background when the report is missing or old."""
        with self._lock:
            st = self._state
            stale = st.finished_at is None or time.time() - st.finished_at > self.max_age_s
            if start_if_stale and stale and not st.running:
                self._state = st = CheckState(st.report, st.finished_at, st.duration_s, True, st.error)
                self._thread = threading.Thread(target=self._run, name="ui-doctor-check", daemon=True)
                self._thread.start()
            return st

    def wait(self, timeout: float) -> CheckState:
        """Wait for a running check (tests and the benchmark)."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return self.state(start_if_stale=False)

    def _run(self) -> None:
        started = time.perf_counter()
        report, error = None, None
        try:
            report = check_stores(self.parts)
        except Exception as exc:  # top of a worker thread: the page shows what failed
            error = f"{type(exc).__name__}: {exc}"[:300]
        with self._lock:
            old = self._state
            self._state = CheckState(report or old.report, time.time(), time.perf_counter() - started, False, error)
