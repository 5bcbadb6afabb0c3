"""``memory-core consolidate`` killed at every step loses nothing and doubles nothing; a rerun finishes.

A store holds clusters of near-duplicates in two tenants (shared rows of several agents, one agent's
private rows, a private row beside a shared copy of it) and rows that must stay apart. A dry run counts
the run's steps at the store boundaries (before and after every vector write and every graph write
transaction, see tests/support/repair_crash.py); then for EVERY step a fresh copy of the store is
consolidated in a subprocess that ends with ``os._exit`` at that step. After each kill the store is
reopened (recovery runs): every row written before is still there, the stores agree (doctor; merged rows'
vector records the kill left are the one allowed finding, and the rerun deletes them), and no row is ended
by two canonicals. A second run then leaves exactly what an uninterrupted run leaves: the
same current memories (tenant, visibility, author, text), once each.

SQLite at every second step, PostgreSQL (embedded Chroma, a database copied by ``CREATE DATABASE ...
TEMPLATE``) at every third (and the last), or every step with ``MEMORY_CORE_RELIABILITY=long``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.operator.consolidation import consolidate
from memory_core.operator.doctor.run import check_stores
from memory_core.versions.chain import MERGED
from testbed.paths import ROOT
from tests.support.agreement import assert_stores_agree
from tests.support.backends import graph_backends
from tests.support.repair_crash import CRASH_EXIT
from tests.support.store_checks import LONG
from tests.support.store_copy import Store

pytestmark = pytest.mark.slow
STRIDE = {"sqlite": 1 if LONG else 2, "postgres": 1 if LONG else 3}
FACTS = ["the staging database runs on postgres sixteen behind pgbouncer",
         "deploys to production happen on tuesdays after the design review",
         "the billing service retries failed webhooks three times with backoff",
         "carol owns the on call rotation for the search cluster this quarter",
         "the mobile app release train leaves every second thursday morning"]
VARIANTS = ["{}", "{}.", "note: {}", "{} (confirmed)"]
Current = tuple[str, str, str, str]  # (tenant, visibility, author of a private row, content)


def fill(core: MemoryCore) -> None:
    for tenant in ("acme", "globex"):
        for f, fact in enumerate(FACTS):
            for v, variant in enumerate(VARIANTS[: 2 + f % 3]):
                core.add_memory(tenant, f"s{v}", ("ann", "bob", "cid")[v % 3], variant.format(fact), type="note")
        core.add_memory(tenant, "s1", "dee", FACTS[0], type="note", visibility="agent")
        core.add_memory(tenant, "s1", "dee", VARIANTS[2].format(FACTS[0]), type="note", visibility="agent")
        core.add_memory(tenant, "s1", "eve", VARIANTS[1].format(FACTS[1]), type="note", visibility="agent")
        core.add_memory(tenant, "s1", "ann", "the api listens on port 5433 in staging", type="note")
        core.add_memory(tenant, "s1", "ann", "the api listens on port 5434 in staging", type="note")


def rows(core: MemoryCore) -> list[tuple[str, int, str, bool, dict[str, object]]]:
    maint = core.operator_parts().maintenance
    return [(t, r.node.id, r.content, r.node.valid_to_us is None, dict(r.node.metadata))
            for t in maint.tenants_present() for r in maint.memory_rows(t)]


def current(core: MemoryCore) -> Counter[Current]:
    maint = core.operator_parts().maintenance
    return Counter((t, r.node.visibility, r.node.agent if r.node.visibility == "agent" else "", r.content)
                   for t in maint.tenants_present() for r in maint.memory_rows(t) if r.node.valid_to_us is None)


def double_merged(core: MemoryCore) -> list[str]:
    """Rows that two live canonicals each claim to have merged."""
    claims = Counter((t, ref) for t, _i, _c, live, meta in rows(core) if live and isinstance(meta.get(MERGED), dict)
                     for ref in meta[MERGED]["merged"])  # type: ignore[index]
    return [f"{t} {ref}" for (t, ref), n in claims.items() if n > 1]


def run(store: Store, crash_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.consolidate_crash", str(store.data_dir),
                           str(crash_at), json.dumps(store.storage)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module", params=graph_backends())
def template(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, set[int],
                                                                                                 Counter[Current]]:
    data_dir = tmp_path_factory.mktemp("dups") / "data"
    store = Store.new(request.param, data_dir, request)
    with store.opened() as core:
        fill(core)
        ids = {i for _t, i, _c, _l, _m in rows(core)}
    clean = store.copy(tmp_path_factory.mktemp("clean") / "data")
    done = run(clean, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    with clean.opened() as core:
        expected = current(core)
    clean.remove()
    return store, ids, expected


def test_an_uninterrupted_run_merges_each_cluster_once_and_keeps_private_and_numbered_rows_apart(
        template: tuple[Store, set[int], Counter[Current]]) -> None:
    _store, ids, expected = template
    assert sum(expected.values()) == 2 * (len(FACTS) + 1 + 1 + 2)  # per tenant: one per fact, dee's, eve's, ports
    assert {k for k, n in expected.items() if n > 1} == set()
    assert ("acme", "agent", "dee", FACTS[0]) in expected or ("acme", "agent", "dee", "note: " + FACTS[0]) in expected
    assert len(ids) == 2 * (sum(2 + f % 3 for f in range(len(FACTS))) + 5)


def test_a_run_killed_at_any_step_loses_and_doubles_nothing(
        template: tuple[Store, set[int], Counter[Current]], tmp_path: Path) -> None:
    store, ids, expected = template
    dry = store.copy(tmp_path / "dry")
    out = run(dry, 0)
    dry.remove()
    assert out.returncode == 0, out.stderr[-3000:]
    steps = int(json.loads(out.stdout.strip().splitlines()[-1])["steps"])
    assert steps >= 20, "the run should write in many steps"
    failures = []
    for crash_at in sorted({*range(1, steps + 1, STRIDE[store.backend]), steps}):
        trial = store.copy(tmp_path / f"trial-{crash_at}")
        killed = run(trial, crash_at)
        assert killed.returncode == CRASH_EXIT, f"step {crash_at}: {killed.stderr[-3000:]}"
        where = json.loads(killed.stdout.strip().splitlines()[-1])["step"]
        with trial.opened() as core:  # recovery at open runs here
            lost = ids - {i for _t, i, _c, _l, _m in rows(core)}
            if lost:
                failures.append(f"killed at step {crash_at} ({where}): lost {sorted(lost)}")
            kinds = {f.kind for f in check_stores(core.operator_parts()).findings}
            if kinds - {"vector_archived"} or double_merged(core):  # merged rows' records: the rerun deletes them
                failures.append(f"killed at step {crash_at} ({where}): stores disagree ({kinds}) or "
                                f"{double_merged(core)}")
            consolidate(core.operator_parts())
            if not check_stores(core.operator_parts()).ok:
                failures.append(f"killed at step {crash_at} ({where}): the rerun left the stores disagreeing")
            if current(core) != expected:
                failures.append(f"killed at step {crash_at} ({where}): the rerun left "
                                f"{sorted((current(core) - expected).elements())} instead of "
                                f"{sorted((expected - current(core)).elements())}")
            assert_stores_agree(core)
        trial.remove()
    assert not failures, "\n".join(failures)
