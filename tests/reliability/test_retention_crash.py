"""``memory-core retention apply`` and ``retention restore`` SIGKILLed at every step lose nothing, archive
no row twice, and a rerun ends as an uninterrupted run.

Two tenants hold old turns (due under ``{turn = 90}``), recent turns, old notes and a locked old turn. A
dry run of the real command (tests/support/retention_crash.py: three rows per batch) counts its steps at
the store boundaries (before and after every vector write and every graph write transaction); then for
every step a fresh copy of the store runs the command in a subprocess that SIGKILLs itself at that step.
After each kill the store is reopened (recovery runs): every row is still there; a row the graph says is
archived while its vector record is still there is a leftover doctor must report (``vector_archived``),
and doctor reports nothing else (no row lost its record without being archived). The run is done again
(in the test's process, through the functions the command calls: half the subprocesses): the archived
rows, their archive times (never archived twice) and the vector index equal an uninterrupted run's, and
doctor is clean. (A restore killed after its graph commit had restored every
ref: its rerun answers NOT_FOUND, as any restore of rows no longer archived does, and changes nothing.)

SQLite at every second step, PostgreSQL (embedded Chroma, a database copied by ``CREATE DATABASE ...
TEMPLATE``) at every third (and the last), or every step with ``MEMORY_CORE_RELIABILITY=long``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.errors import NotFoundError
from memory_core.operator import OperatorParts
from memory_core.operator.doctor.run import check_stores
from memory_core.operator.retention import apply_retention, restore_archived
from memory_core.refs import memory_ref
from testbed.paths import ROOT
from tests.support.backends import graph_backends
from tests.support.store_checks import LONG
from tests.support.store_copy import Store

pytestmark = pytest.mark.slow
STRIDE = {"sqlite": 1 if LONG else 2, "postgres": 1 if LONG else 3}
BATCH = 3
OLD = (datetime.now(UTC) - timedelta(days=120)).isoformat()
RECENT = (datetime.now(UTC) - timedelta(days=10)).isoformat()
State = tuple[dict[str, int | None], set[str]]  # archived_us by "tenant ref", vector records ("tenant ref")


def fill(core: MemoryCore) -> None:
    for tenant in ("acme", "globex"):
        for i in range(7):
            core.add_memory(tenant, f"s{i % 2}", "ann", f"{tenant} old turn {i} about the kiwi harvest",
                            timestamp=OLD)
        core.add_memory(tenant, "s1", "bob", f"{tenant} bob's private old turn", timestamp=OLD, visibility="agent")
        core.add_memory(tenant, "s1", "ann", f"{tenant} recent turn about the kiwi harvest", timestamp=RECENT)
        core.add_memory(tenant, "s1", "ann", f"{tenant} old note about the kiwi harvest", type="note",
                        timestamp=OLD)
        locked = core.add_memory(tenant, "s1", "ann", f"{tenant} locked old turn", timestamp=OLD).ref
        assert locked is not None
        core.lock_memory(tenant, locked)


def state(core: MemoryCore) -> State:
    parts = core.operator_parts()
    archived: dict[str, int | None] = {}
    vectors: set[str] = set()
    for tenant in parts.maintenance.tenants_present():
        for r in parts.maintenance.memory_rows(tenant):
            archived[f"{tenant} {memory_ref(r.node.id)}"] = r.node.archived_us
        vectors |= {f"{tenant} {ref}" for ref in parts.vectors.all_ids(tenant)}
    return archived, vectors


def config(store: Store, folder: Path) -> Path:
    """The command's settings: the store's graph, the deterministic embedder, ``{turn = 90}``."""
    storage = "".join(f"{k} = {json.dumps(v)}\n" for k, v in store.storage.items())
    path = folder / f"{store.data_dir.name}.toml"
    path.write_text(f'[storage]\n{storage}\n[embedding]\nprovider = "hash"\n\n'
                    "[retention]\narchive_after_days = { turn = 90 }\n", encoding="utf-8")
    return path


def run(store: Store, crash_at: int, *args: str) -> subprocess.CompletedProcess[str]:
    conf = config(store, store.data_dir.parent)
    return subprocess.run([sys.executable, "-m", "tests.support.retention_crash", str(crash_at), store.backend,
                           str(BATCH), *args, "--config", str(conf), "--data-dir", str(store.data_dir)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


def last_json(out: subprocess.CompletedProcess[str]) -> dict[str, object]:
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.fixture(scope="module", params=graph_backends())
def stores(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Store]:
    """The store before retention, and a copy after an uninterrupted ``retention apply``."""
    data_dir = tmp_path_factory.mktemp("old") / "data"
    store = Store.new(request.param, data_dir, request)
    with store.opened() as core:
        fill(core)
    applied = store.copy(tmp_path_factory.mktemp("applied") / "data")
    done = run(applied, 0, "retention", "apply", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return store, applied


def restore_args(applied: Store) -> list[str]:
    """Restore every archived row of acme (more than one batch)."""
    with applied.opened() as core:
        archived, _ = state(core)
    refs = sorted(key.split(" ")[1] for key, at in archived.items() if at is not None and key.startswith("acme "))
    assert len(refs) > BATCH
    return ["retention", "restore", *refs, "--tenant", "acme", "--json"]


def with_policy(parts: OperatorParts) -> OperatorParts:
    """The parts with the command's policy (``{turn = 90}``), for the rerun in this process."""
    settings = parts.settings.model_copy(update={"retention": parts.settings.retention.model_copy(
        update={"archive_after_days": {"turn": 90}})})
    return replace(parts, settings=settings)


def check_kills(template: Store, args: list[str], tmp_path: Path,
                rerun: Callable[[OperatorParts], object]) -> list[str]:
    """Kill the command ``args`` at every STRIDE-th step of copies of ``template``; reopen, check, ``rerun``;
    compare with an uninterrupted run of the command."""
    reference = template.copy(tmp_path / "reference")
    out = run(reference, 0, *args)
    assert out.returncode == 0, out.stderr[-3000:]
    steps = int(last_json(out)["steps"])  # type: ignore[call-overload]
    assert steps >= 8, "the run should write in many steps"
    with reference.opened() as core:
        want_archived, want_vectors = state(core)
        assert check_stores(core.operator_parts()).ok
    reference.remove()
    with template.opened() as core:
        before, _ = state(core)
    failures = []
    for crash_at in sorted({*range(1, steps + 1, STRIDE[template.backend]), steps}):
        trial = template.copy(tmp_path / f"trial-{crash_at}")
        killed = run(trial, crash_at, *args)
        assert killed.returncode == -9, f"step {crash_at}: {killed.returncode} {killed.stderr[-3000:]}"
        where = last_json(killed)["step"]
        with trial.opened() as core:  # recovery at open runs here
            archived, vectors = state(core)
            if set(archived) != set(before):
                failures.append(f"killed at step {crash_at} ({where}): lost {sorted(set(before) - set(archived))}")
            half = {k for k, at in archived.items() if at is not None and k in vectors}
            found = check_stores(core.operator_parts()).findings
            reported = {f"{f.tenant} {f.ref}" for f in found if f.kind == "vector_archived"}
            others = [f.to_dict() for f in found if f.kind != "vector_archived"]
            if reported != half or others:
                failures.append(f"killed at step {crash_at} ({where}): half-archived {sorted(half)}, doctor found "
                                f"{sorted(reported)} and {others}")
            finished = {k for k, at in archived.items() if at} == {k for k, at in want_archived.items() if at}
            try:
                rerun(with_policy(core.operator_parts()))  # as the command runs it, in this process
            except NotFoundError:  # a restore that had finished: its refs are no longer archived
                if not (finished and args[1] == "restore"):
                    raise
            final, final_vectors = state(core)
            twice = {k for k, at in archived.items() if at is not None and final.get(k) not in (at, None)}
            if twice:
                failures.append(f"killed at step {crash_at} ({where}): archived twice {sorted(twice)}")
            if {k for k, at in final.items() if at} != {k for k, at in want_archived.items() if at} \
                    or final_vectors != want_vectors or not check_stores(core.operator_parts()).ok:
                failures.append(f"killed at step {crash_at} ({where}): the rerun left archived "
                                f"{sorted(k for k, at in final.items() if at)} with vectors {sorted(final_vectors)}")
        trial.remove()
    return failures


def test_an_uninterrupted_apply_archives_the_old_unlocked_turns_only(stores: tuple[Store, Store]) -> None:
    _store, applied = stores
    with applied.opened() as core:
        archived, vectors = state(core)
        assert check_stores(core.operator_parts()).ok
    assert sum(1 for at in archived.values() if at) == 2 * 8
    assert len(vectors) == len(archived) - 2 * 8


def test_an_apply_killed_at_any_step_archives_each_row_once_and_a_rerun_finishes(
        stores: tuple[Store, Store], tmp_path: Path) -> None:
    store, _applied = stores
    failures = check_kills(store, ["retention", "apply", "--json"], tmp_path, apply_retention)
    assert not failures, "\n".join(failures)


def test_a_restore_killed_at_any_step_loses_nothing_and_a_rerun_finishes(
        stores: tuple[Store, Store], tmp_path: Path) -> None:
    _store, applied = stores
    args = restore_args(applied)
    refs = args[2:args.index("--tenant")]
    failures = check_kills(applied, args, tmp_path, lambda parts: restore_archived(parts, "acme", refs))
    assert not failures, "\n".join(failures)
