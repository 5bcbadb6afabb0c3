"""``doctor --repair`` killed at every step loses nothing, and the next repair finishes the job.

The store is damaged the ways doctor repairs (memories whose SQLite rows are gone, so their
Chroma record is the only copy; a ghost record; an orphan whose id an episode now holds; a
record too incomplete to rebuild; a missing and a stale vector record; stale lexical rows).
A dry run counts the repair's steps at the store boundaries (before and after every vector
write and every SQLite write transaction, see tests/support/repair_crash.py); then, for
EVERY step, a fresh copy of the damaged store is repaired in a subprocess that ends with
``os._exit`` at that step. After each kill the store is reopened (recovery runs) and every
memory that existed in either store before the repair must still exist in one of them (or,
for the unrebuildable record, in doctor's quarantine file); a second repair must then leave
doctor clean, with each restorable memory present exactly once.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.doctor import check, repair
from tests.support.agreement import assert_stores_agree
from tests.support.repair_crash import CRASH_EXIT, open_store

ROOT = Path(__file__).resolve().parent.parent
GHOST = {"session": "s9", "agent": "ghost", "type": "note", "ts_us": 1_760_000_000_000_000,
         "visibility": "tenant", "salience": 0.6, "project_id": "", "kind": "memory"}
UNREBUILDABLE = "half a record"

Memory = tuple[str, str]  # (tenant, content)


def damage(core: MemoryCore) -> None:
    """Plant one of each problem a repair fixes by writing (not only by reading)."""
    refs = {}
    for tenant in ("acme", "globex"):
        for text in ("planting apple trees", "pruning the pear orchard", "harvest plans for plums",
                     "ship the cider on friday"):
            refs[tenant, text] = core.add_memory(tenant, "s1", "alice", f"{tenant}: {text}").ref
    episode = core.summarize_session("acme", "s1")
    only_copies = [refs["acme", "planting apple trees"], refs["globex", "harvest plans for plums"]]
    with core.db.transaction() as cur:  # the Chroma record becomes the only copy of these two
        cur.executemany("DELETE FROM memories WHERE id = ?", [(int(r.split(":")[1]),) for r in only_copies])
    embed = core.embedder.embed
    core.vectors.upsert("acme", ["mem:500"], embed(["the ghost remembers the orchard"]),
                        ["the ghost remembers the orchard"], [{**GHOST, "tenant": "acme"}])
    taken = f"mem:{episode.ref.split(':')[1]}"  # restoring it needs a new ref
    core.vectors.upsert("acme", [taken], embed(["an orphan whose id an episode took"]),
                        ["an orphan whose id an episode took"], [{**GHOST, "tenant": "acme"}])
    core.vectors.upsert("globex", ["mem:600"], embed([UNREBUILDABLE]), [UNREBUILDABLE],
                        [{"tenant": "globex", "kind": "memory"}])
    core.vectors.delete("acme", [refs["acme", "pruning the pear orchard"]])
    stale = refs["globex", "ship the cider on friday"]
    core.vectors.upsert("globex", [stale], embed(["tampered text"]), ["tampered text"],
                        [{**GHOST, "tenant": "globex", "session": "s1", "agent": "alice", "type": "turn"}])


def memories(core: MemoryCore) -> Counter[Memory]:
    """Every memory either store holds: SQLite rows, plus Chroma records that have no row."""
    with core.db.lock:
        rows = core.db.conn.execute("SELECT id, tenant, content FROM memories").fetchall()
    held = Counter((str(t), str(c)) for _i, t, c in rows)
    ids = {(str(t), f"mem:{i}") for i, t, _c in rows}
    for tenant in core.vectors.tenants():
        orphans = sorted(r for r in core.vectors.all_ids(tenant) if r.startswith("mem:") and (tenant, r) not in ids)
        for document, _meta in core.vectors.documents(tenant, orphans).values():
            held[tenant, document] += 1
    return held


def quarantined(data_dir: Path) -> set[Memory]:
    return {(r["tenant"], r["document"]) for path in (data_dir / "doctor").glob("quarantine-*.jsonl")
            for r in map(json.loads, path.read_text().splitlines())}


def run_repair(data_dir: Path, crash_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.repair_crash", str(data_dir), str(crash_at)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[Memory]]:
    template = tmp_path_factory.mktemp("damaged") / "data"
    with open_store(template) as core:
        damage(core)
        before = set(memories(core))
        assert {f.kind for f in check(core).findings} >= {"vector_orphan", "vector_missing", "vector_stale",
                                                          "lexical_stale", "dangling_edge"}
    return template, before


def test_a_repair_run_to_completion_restores_every_memory(damaged: tuple[Path, set[Memory]], tmp_path: Path) -> None:
    template, before = damaged
    data_dir = tmp_path / "data"
    shutil.copytree(template, data_dir)
    done = run_repair(data_dir, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["ok"] is True
    with open_store(data_dir) as core:
        assert check(core).ok
        held = memories(core)
        assert {m: n for m, n in held.items() if n != 1} == {}
        assert set(held) == before - {("globex", UNREBUILDABLE)}
        assert ("globex", UNREBUILDABLE) in quarantined(data_dir)
        assert_stores_agree(core)


def test_a_repair_killed_at_any_step_loses_no_memory(damaged: tuple[Path, set[Memory]], tmp_path: Path) -> None:
    template, before = damaged
    dry = tmp_path / "dry"
    shutil.copytree(template, dry)
    out = run_repair(dry, 0)
    assert out.returncode == 0, out.stderr[-3000:]
    steps = int(json.loads(out.stdout.strip().splitlines()[-1])["steps"])
    assert steps >= 10, "the repair should write in many steps"
    failures = []
    for crash_at in range(1, steps + 1):
        data_dir = tmp_path / f"trial-{crash_at}"
        shutil.copytree(template, data_dir)
        trial = run_repair(data_dir, crash_at)
        assert trial.returncode == CRASH_EXIT, f"step {crash_at}: {trial.stderr[-3000:]}"
        where = json.loads(trial.stdout.strip().splitlines()[-1])["step"]
        with open_store(data_dir) as core:  # recovery at open runs here
            kept = set(memories(core)) | quarantined(data_dir)
            lost = before - kept
            if lost:
                failures.append(f"killed at step {crash_at} ({where}): lost {sorted(lost)}")
            report = repair(core)
            held = memories(core)
            duplicated = {m: n for m, n in held.items() if n != 1}
            if not report.ok or not check(core).ok or duplicated:
                failures.append(f"killed at step {crash_at} ({where}): the next repair left "
                                f"{[f.to_dict() for f in report.remaining or []]}, duplicates {duplicated}")
            if set(held) | {("globex", UNREBUILDABLE)} != before | {("globex", UNREBUILDABLE)}:
                failures.append(f"killed at step {crash_at} ({where}): after the next repair the store holds "
                                f"{sorted(set(held) ^ before)} differently")
        shutil.rmtree(data_dir)
    assert not failures, "\n".join(failures)
