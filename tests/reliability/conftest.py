"""Reliability harness plumbing: the ``long`` flag, the results collector and the summary
table printed at the end of the run (and written to ``bench/results/reliability.json``).

``MEMORY_CORE_RELIABILITY=long`` (``make reliability``) runs every harness at full size;
without it the same tests run reduced, inside ``make test``'s budget. The crash harness
(``test_crash.py``, with its own long mode) and the store's stateful, disk-fault and
multi-process tests live here too; their outcomes join the table.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable

import pytest

from tests.reliability.harness import LONG, MODE, RESULTS, RESULTS_PATH, HarnessResult, ReliabilityResults

CRASH_TEST_FILE = "tests/reliability/test_crash.py"
# Reliability tests of issue 7 kept in their own files; each joins the table as one row
# (tests run, failures, time).
EXTERNAL_HARNESSES = {
    "tests/reliability/test_store_stateful.py": "store stateful (model check)",
    "tests/reliability/test_doctor_crash.py": "doctor repair (killed at its steps)",
    "tests/reliability/test_disk_faults.py": "disk faults",
    "tests/reliability/test_multiprocess.py": "multi-process",
}
# ... of which these are parametrized over the store backends: one row per backend
PER_BACKEND = {"tests/reliability/test_store_stateful.py", "tests/reliability/test_doctor_crash.py"}
_CRASH_TRIAL = re.compile(r"^trial (\d+): killed", re.MULTILINE)  # each line is printed twice
_CRASH_ACKS = re.compile(r"'acknowledged': (\d+)")
_PARAM = re.compile(r"\[([^\]]+)\]$")


@pytest.fixture(scope="session")
def long() -> bool:
    """True under ``MEMORY_CORE_RELIABILITY=long``: full-size runs."""
    return LONG


@pytest.fixture(scope="session")
def reliability_results() -> ReliabilityResults:
    """The session's results table; each harness fills its own row(s)."""
    return RESULTS


@pytest.fixture
def results_row(request: pytest.FixtureRequest) -> Callable[[str], HarnessResult]:
    """``results_row(name)``: the row ``name``, tied to the requesting test's outcome."""

    def row(harness: str) -> HarnessResult:
        return RESULTS.row(harness, request.node.nodeid)

    return row


def _test_reports(terminalreporter: pytest.TerminalReporter) -> list[pytest.TestReport]:
    """Each test's deciding report: its call, or the setup that kept it from running.

    Read from the terminal reporter at the end rather than through a logreport hook: a
    conftest's hooks only see the items below its own directory, and test_crash.py is not.
    """
    reports = [r for stat in terminalreporter.stats.values() for r in stat if isinstance(r, pytest.TestReport)]
    return [r for r in reports if r.when == "call" or (r.when == "setup" and r.outcome != "passed")]


def backend_of(nodeid: str) -> str | None:
    """The backend a parametrized test ran over (``test_x[postgres]`` -> ``postgres``), if any."""
    match = _PARAM.search(nodeid)
    return match.group(1) if match else None


def harness_name(name: str, nodeid: str) -> str:
    """A row per backend for the harnesses in PER_BACKEND: ``name (..., backend)``."""
    backend = backend_of(nodeid) if nodeid.split("::", 1)[0] in PER_BACKEND else None
    if backend is None:
        return name
    return f"{name[:-1]}, {backend})" if name.endswith(")") else f"{name} ({backend})"


def _record_crash_run(report: pytest.TestReport) -> None:
    """The crash harness (another helper's module) joins the table from its report, one row per
    backend: its trials, the acknowledged writes its last check verified (as steps), and its
    verdict (it asserts 0 lost and 0 half-written)."""
    module = sys.modules.get("tests.test_crash") or sys.modules.get("test_crash")
    backend = backend_of(report.nodeid) or "sqlite"
    row = RESULTS.row(f"crash (SIGKILL writer, {backend})", report.nodeid)
    kills = len(set(_CRASH_TRIAL.findall(report.capstdout)))
    trials = getattr(module, "TRIALS", {})
    row.trials = int(trials.get(backend, 0) if isinstance(trials, dict) else trials) or kills
    row.steps = max((int(n) for n in _CRASH_ACKS.findall(report.capstdout)), default=0)
    if report.outcome != "passed":
        row.errors += 1
        row.notes = "failed: see the test's report for what was lost or half-written"
    else:
        seed = re.search(r"MEMORY_CORE_CRASH_SEED=(\d+)", report.capstdout)
        row.notes = (f"{kills} kills; steps = acknowledged writes verified; "
                     "0 lost, doctor clean (asserted)" + (f"; seed {seed.group(1)}" if seed else ""))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for report in _test_reports(terminalreporter):
        path = report.nodeid.split("::", 1)[0]
        if path == CRASH_TEST_FILE:
            _record_crash_run(report)
        elif path in EXTERNAL_HARNESSES:
            row = RESULTS.row(harness_name(EXTERNAL_HARNESSES[path], report.nodeid), report.nodeid)
            row.examples += 1
            row.errors += report.outcome == "failed"
            row.notes = f"{row.examples} tests (counts inside each are the module's own)"
        RESULTS.outcome(report.nodeid, report.outcome, report.duration)
    if not RESULTS.rows:
        return
    title = f"reliability summary ({MODE} run" + ("" if LONG else "; MEMORY_CORE_RELIABILITY=long for full size") + ")"
    terminalreporter.write_sep("=", title)
    for line in RESULTS.table():
        terminalreporter.write_line(line)
    notes = RESULTS.notes()
    if notes:
        terminalreporter.write_line("")
        for line in notes:
            terminalreporter.write_line(line)
    RESULTS_PATH.parent.mkdir(parents=True, exist_ok=True)
    RESULTS_PATH.write_text(json.dumps(RESULTS.to_json(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    terminalreporter.write_line(f"(written to {RESULTS_PATH.relative_to(RESULTS_PATH.parents[2])})")
