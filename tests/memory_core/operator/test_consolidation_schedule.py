"""The background consolidation schedule (memory_core.operator.schedule): each run merges what
``memory-core consolidate`` would, one merge per write-path call, logs ids and counts (never content), survives
a failed run, stops between merges, and is never built when ``consolidation.every_s`` is 0 (the default)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace
from typing import Any

import pytest

from memory_core import MemoryCore, load_settings
from memory_core.errors import StoreUnavailableError
from memory_core.observe.logs import tenant_label
from memory_core.operator import ConsolidationSchedule, OperatorParts
from memory_core.operator.consolidation import consolidate
from memory_core.operator.doctor.run import check_stores
from memory_core.operator.schedule import log as schedule_log
from tests.support.backends import store_backends


@pytest.fixture(params=store_backends("memory", "persistent"))
def backend(request: pytest.FixtureRequest) -> str:
    """The schedule runs consolidation's own writes (test_consolidation covers every backend)."""
    return str(request.param)


FACT = "the staging database runs on postgres sixteen behind pgbouncer"
COPIES = [FACT, "The staging database runs on Postgres sixteen, behind pgbouncer.",
          "note: the staging database runs on postgres sixteen behind pgbouncer"]
OTHER_FACT = "deploys to production happen on tuesdays after the design review"
OTHER_COPIES = [OTHER_FACT, OTHER_FACT + ".", "note: " + OTHER_FACT]


def fill(core: MemoryCore, tenant: str) -> None:
    for i, text in enumerate(COPIES + OTHER_COPIES):
        core.add_memory(tenant, "s1", ("ann", "bob", "cid")[i % 3], text, type="note")
    core.add_memory(tenant, "s1", "ann", "the api listens on port 5433 in staging", type="note")
    core.add_memory(tenant, "s1", "ann", "the api listens on port 5434 in staging", type="note")


def current(core: MemoryCore, tenant: str) -> list[str]:
    return sorted(m.content for m in core.recall(tenant, "", limit=50, collapse=False).messages)


def fields(caplog: pytest.LogCaptureFixture, event: str) -> list[dict[str, Any]]:
    return [r.memory_core_fields for r in caplog.records  # type: ignore[attr-defined]
            if r.name == schedule_log.name and getattr(r, "memory_core_fields", {}).get("event") == event]


def test_a_run_merges_what_consolidate_would_one_merge_per_write_and_logs_no_content(
        core: MemoryCore, caplog: pytest.LogCaptureFixture) -> None:
    for tenant in ("acme", "globex"):
        fill(core, tenant)
    parts = core.operator_parts()
    planned = consolidate(parts, dry_run=True)
    runs: list[tuple[int, bool]] = []
    schedule = ConsolidationSchedule(lambda: parts, 60, on_run=lambda n, ok: runs.append((n, ok)))
    calls = []
    real = parts.writer.add_many

    def counted(items: Any, **kw: Any) -> Any:
        calls.append(len(items))
        return real(items, **kw)

    parts.writer.add_many = counted  # type: ignore[method-assign]
    caplog.set_level(logging.INFO, logger=schedule_log.name)
    report = schedule.run_once(parts)
    assert len(report.merges) == len(planned.merges) == 4 and runs == [(4, True)]
    assert calls == [1, 1, 1, 1]  # one canonical per writer-lock hold
    for tenant in ("acme", "globex"):
        rows = current(core, tenant)
        assert len(rows) == 4 and {"the api listens on port 5433 in staging",
                                   "the api listens on port 5434 in staging"} <= set(rows)
    merged = fields(caplog, "consolidation_merge")
    assert len(merged) == 4 and {m["tenant"] for m in merged} == {tenant_label(t, "hash") for t in ("acme", "globex")}
    assert all(len(m["merged"]) == 3 and m["canonical"].startswith("mem:") for m in merged)
    assert fields(caplog, "consolidation_run")[0] | {"ms": 0} == {"event": "consolidation_run", "ok": True,
                                                                  "merges": 4, "rows_retired": 8, "skipped": 0,
                                                                  "ms": 0}
    text = json.dumps([r.getMessage() for r in caplog.records])
    assert "postgres" not in text and "acme" not in text  # ids and counts only
    assert check_stores(parts).ok
    assert schedule.run_once(parts).merges == []  # a rerun changes nothing


def test_a_failed_run_is_logged_and_the_next_one_merges(core: MemoryCore, caplog: pytest.LogCaptureFixture) -> None:
    fill(core, "acme")
    parts = core.operator_parts()
    failing = True

    class Down:
        def tenants_present(self) -> set[str]:
            raise StoreUnavailableError("the vector store is down")

    def parts_of() -> OperatorParts:
        nonlocal failing
        if failing:
            failing = False
            return replace(parts, maintenance=Down())  # type: ignore[arg-type]
        return parts

    runs: list[tuple[int, bool]] = []
    caplog.set_level(logging.INFO, logger=schedule_log.name)
    schedule = ConsolidationSchedule(parts_of, 0.05, on_run=lambda n, ok: runs.append((n, ok)))
    schedule.start()
    deadline = time.monotonic() + 20
    while len(runs) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    schedule.stop()
    assert runs[:2] == [(0, False), (2, True)]
    assert fields(caplog, "consolidation_failed")[0] == {
        "event": "consolidation_failed", "error": "memory_core.errors.StoreUnavailableError",
        "code": "STORE_UNAVAILABLE", "merges": 0}
    assert len(current(core, "acme")) == 4
    assert schedule._thread is not None and not schedule._thread.is_alive()


def test_a_stopping_schedule_writes_no_further_merge_and_skips_while_the_stores_are_not_open(
        core: MemoryCore) -> None:
    fill(core, "acme")
    parts = core.operator_parts()
    schedule = ConsolidationSchedule(lambda: None, 0.02)
    schedule.start()
    time.sleep(0.2)  # wake-ups with no open store: skipped
    assert schedule.runs == 0
    schedule.stop()
    assert schedule.run_once(parts).merges == []  # asked to stop: no merge is written
    assert len(current(core, "acme")) == 8


def test_off_by_default_and_zero_is_no_schedule() -> None:
    assert load_settings(environ={}).consolidation.every_s == 0
    with pytest.raises(ValueError, match="every_s > 0"):
        ConsolidationSchedule(lambda: None, 0)


def test_with_model_canonical_the_schedule_has_the_provider_write_each_canonical(core: MemoryCore) -> None:
    from memory_core.versions.chain import MERGED
    from tests.support.fake_llm import fake_llm, ok

    fill(core, "acme")
    parts = core.operator_parts()
    written = "The staging database runs on Postgres sixteen, behind pgbouncer."
    with fake_llm() as fake:
        fake.enqueue(ok(written), ok("Deploys happen on Tuesdays."))  # the oldest cluster first
        s = parts.settings
        settings = s.model_copy(update={
            "model_provider": s.model_provider.model_copy(update={"enabled": True, "api_base": fake.api_base,
                                                                   "max_retries": 0}),
            "consolidation": s.consolidation.model_copy(update={"model_canonical": True})})
        report = ConsolidationSchedule(lambda: None, 60).run_once(replace(parts, settings=settings))
        assert fake.request_count == 2
    marks = [(m.content, core.check_memory("acme", ref).memory.metadata[MERGED]) for m, ref in report.merges if ref]
    assert [(text, mark["text"]) for text, mark in marks] == [
        (written, {"by": "model", "model": "openai/gpt-4o-mini"}),
        (marks[1][0], {"by": "member", "fallback": "dropped words the members share"})]
    assert marks[1][0] in OTHER_COPIES
