"""``doctor --repair`` killed at every step loses nothing, and the next repair finishes the job.

The store is damaged the ways doctor repairs (memories whose SQLite rows are gone, so their
Chroma record is the only copy; a ghost record; an orphan whose id an episode now holds; a
record too incomplete to rebuild; a missing and a stale vector record; stale lexical rows; a
version cycle and a version fork; secrets stored in clear before the secrets guard existed, in
memories, their metadata, a session summary and the entities extracted from them, one of them also
in a lost row's orphan record). Memories are compared with their secrets redacted (a repair rewrites
them), and after the second repair no secret is left in the graph, the lexical index or the vector
records.
A dry run counts the repair's steps at the store boundaries (before and after every vector
write and every SQLite write transaction, see tests/support/repair_crash.py); then, for
EVERY step, a fresh copy of the damaged store is repaired in a subprocess that ends with
``os._exit`` at that step. After each kill the store is reopened (recovery runs) and every
memory that existed in either store before the repair must still exist in one of them (or,
for the unrebuildable record, in doctor's quarantine file); a second repair must then leave
doctor clean, with each restorable memory present exactly once.

The same damage, kills and assertions run over SQLite and over PostgreSQL (with embedded
Chroma, so a copy of the data directory plus a copy of the database, ``CREATE DATABASE ...
TEMPLATE``, is a copy of the store). ``make test`` kills the SQLite repair at every second step
and the PostgreSQL one at every third (and the last); ``MEMORY_CORE_RELIABILITY=long`` at every step.
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
from memory_core.operator.doctor.run import check_stores, repair_stores
from memory_core.operator.doctor.secrets import memory_secrets, redacted_text
from memory_core.secret_guard import SecretGuard, detect
from testbed.paths import ROOT
from testbed.secrets_corpus import SAMPLES
from tests.support.agreement import assert_stores_agree
from tests.support.backends import graph_backends
from tests.support.repair_crash import CRASH_EXIT
from tests.support.sqlite import sqlite_db
from tests.support.store_checks import LONG
from tests.support.store_copy import Store

# which steps a kill tries: every STRIDE-th (and the last)
STRIDE = {"sqlite": 1 if LONG else 2, "postgres": 1 if LONG else 3}
GHOST = {"session": "s9", "agent": "ghost", "type": "note", "ts_us": 1_760_000_000_000_000,
         "visibility": "tenant", "salience": 0.6, "project_id": "", "kind": "memory"}
UNREBUILDABLE = "half a record"
PLANTED = [s for s in SAMPLES if s.name in (".env dump", "pem private key", "curl github api")]
SECRET_TEXTS = [s.text for s in PLANTED]
SECRET_VALUES = [line for s in PLANTED for _k, v in s.secrets for line in v.split("\n") if len(line) >= 20]

Memory = tuple[str, str]  # (tenant, content)


def delete_rows(core: MemoryCore, ids: list[int]) -> None:
    """Rows gone from the graph store behind the service's back (a bad restore, a hand edit)."""
    if sqlite_db(core) is not None:
        with sqlite_db(core).transaction() as cur:
            cur.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])
        return
    import psycopg

    with psycopg.connect(core.settings.storage.postgres_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE id = ANY(%s)", [ids])


def plant_secrets(core: MemoryCore) -> int:
    """Memories, metadata, a summary and extracted entities holding secrets, as a store written before
    the guard existed holds them (the guard set to allow while they are written); returns the id of
    one such memory whose row the damage then loses (its Chroma record is its only copy)."""
    guard = core._writer.guard
    core._writer.guard = SecretGuard("allow")
    try:
        ids = [int(core.add_memory("acme", "s2", "carol", text, metadata={"db": {"password": "hunter2!x"}}
                                   ).ref.split(":")[1]) for text in SECRET_TEXTS]
        core.summarize_session("acme", "s2")
    finally:
        core._writer.guard = guard
    assert check_stores(core.operator_parts()).findings, "the planted secrets are found"
    return ids[-1]


def damage(core: MemoryCore) -> None:
    """Plant one of each problem a repair fixes by writing (not only by reading)."""
    lost_secret = plant_secrets(core)
    refs = {}
    for tenant in ("acme", "globex"):
        for text in ("planting apple trees", "pruning the pear orchard", "harvest plans for plums",
                     "ship the cider on friday"):
            refs[tenant, text] = core.add_memory(tenant, "s1", "alice", f"{tenant}: {text}").ref
    episode = core.summarize_session("acme", "s1")
    only_copies = [refs["acme", "planting apple trees"], refs["globex", "harvest plans for plums"]]
    delete_rows(core, [int(r.split(":")[1]) for r in only_copies] + [lost_secret])  # the Chroma record: the only copy
    embed = core._embedder.embed
    core._vectors.upsert("acme", ["mem:500"], embed(["the ghost remembers the orchard"]),
                        ["the ghost remembers the orchard"], [{**GHOST, "tenant": "acme"}])
    taken = f"mem:{episode.ref.split(':')[1]}"  # restoring it needs a new ref
    core._vectors.upsert("acme", [taken], embed(["an orphan whose id an episode took"]),
                        ["an orphan whose id an episode took"], [{**GHOST, "tenant": "acme"}])
    core._vectors.upsert("globex", ["mem:600"], embed([UNREBUILDABLE]), [UNREBUILDABLE],
                        [{"tenant": "globex", "kind": "memory"}])
    core._vectors.delete("acme", [refs["acme", "pruning the pear orchard"]])
    plant_broken_chains(core)
    stale = refs["globex", "ship the cider on friday"]
    core._vectors.upsert("globex", [stale], embed(["tampered text"]), ["tampered text"],
                        [{**GHOST, "tenant": "globex", "session": "s1", "agent": "alice", "type": "turn"}])


def plant_broken_chains(core: MemoryCore) -> None:
    """Version chains a crafted import used to write: a two-row cycle and a fork (two versions of one row)."""
    ids = [int(core.add_memory("initech", "s1", "ann", f"initech version {i}",
                               timestamp=f"2026-03-01T10:00:0{i}+00:00").ref.split(":")[1]) for i in range(5)]
    links = {ids[0]: ids[1], ids[1]: ids[0], ids[3]: ids[2], ids[4]: ids[2]}  # newer -> the version it corrects
    with core._writer.lock, core._graph.transaction() as tx:
        for new, old in links.items():
            tx.set_memory_state("initech", new, {"supersedes_id": old})
            tx.set_memory_state("initech", old, {"valid_to_us": 1_772_400_000_000_000})
            tx.write_edge("initech", f"mem:{new}", f"mem:{old}", "SUPERSEDES")
    core._graph.invalidate()


def memories(core: MemoryCore) -> Counter[Memory]:
    """Every memory either store holds: graph rows, plus Chroma records that have no row (each
    content with its secrets redacted: a repair rewrites them, which loses no memory)."""
    rows = [(m.node.id, m.node.tenant, m.content) for tenant in core.operator_parts().maintenance.tenants_present()
            for m in core.operator_parts().maintenance.memory_rows(tenant)]
    held = Counter((str(t), redacted_text(str(c))) for _i, t, c in rows)
    ids = {(str(t), f"mem:{i}") for i, t, _c in rows}
    for tenant in core._vectors.tenants():
        orphans = sorted(r for r in core._vectors.all_ids(tenant) if r.startswith("mem:") and (tenant, r) not in ids)
        for document, _meta in core._vectors.documents(tenant, orphans).values():
            held[tenant, redacted_text(document)] += 1
    return held


def assert_no_secret_left(core: MemoryCore) -> None:
    """Graph rows, summaries, entities, the lexical index (doctor compares it to the rows) and every
    vector record hold no secret."""
    for tenant in core.operator_parts().maintenance.tenants_present():
        for m in core.operator_parts().maintenance.memory_rows(tenant):
            assert not memory_secrets(m.as_row())[0].found, f"{tenant} mem:{m.node.id} holds a secret"
        assert not [e.id for e in core._graph.episodes(tenant) if detect(e.summary)]
        refs = sorted(core._vectors.all_ids(tenant))
        assert not [r for r, (doc, _m) in core._vectors.documents(tenant, refs).items() if detect(doc)]
        names = [n for e in core._graph.entity_records(tenant) for n in (e.name, *e.aliases)]
        assert not [n for n in names if any(len(n) >= 16 and (n in v or v in n) for v in SECRET_VALUES)], names
    assert not [f for f in check_stores(core.operator_parts()).findings if f.kind == "secret_stored"]


def quarantined(data_dir: Path) -> set[Memory]:
    return {(r["tenant"], redacted_text(r["document"])) for path in (data_dir / "doctor").glob("quarantine-*.jsonl")
            for r in map(json.loads, path.read_text().splitlines())}


def run_repair(store: Store, crash_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.repair_crash", str(store.data_dir), str(crash_at),
                           json.dumps(store.storage)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module", params=graph_backends())
def damaged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, set[Memory]]:
    data_dir = tmp_path_factory.mktemp("damaged") / "data"
    template = Store.new(request.param, data_dir, request)
    with template.opened() as core:
        damage(core)
        before = set(memories(core))
        assert {f.kind for f in check_stores(core.operator_parts()).findings} >= {
            "vector_orphan", "vector_missing", "vector_stale", "lexical_stale", "dangling_edge", "secret_stored",
            "version_cycle", "version_fork"}
    return template, before


def test_a_repair_run_to_completion_restores_every_memory(damaged: tuple[Store, set[Memory]], tmp_path: Path) -> None:
    template, before = damaged
    store = template.copy(tmp_path / "data")
    data_dir = store.data_dir
    done = run_repair(store, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["ok"] is True
    with store.opened() as core:
        assert check_stores(core.operator_parts()).ok
        held = memories(core)
        assert {m: n for m, n in held.items() if n != 1} == {}
        assert set(held) == before - {("globex", UNREBUILDABLE)}
        assert ("globex", UNREBUILDABLE) in quarantined(data_dir)
        assert_stores_agree(core)
        assert_no_secret_left(core)
        current = {m.content for m in core.recall("initech", "", limit=10).messages}
        assert current == {"initech version 1", "initech version 4"}  # each mended chain: its newest is current


def test_a_repair_killed_at_any_step_loses_no_memory(damaged: tuple[Store, set[Memory]], tmp_path: Path) -> None:
    template, before = damaged
    dry = template.copy(tmp_path / "dry")
    out = run_repair(dry, 0)
    dry.remove()
    assert out.returncode == 0, out.stderr[-3000:]
    steps = int(json.loads(out.stdout.strip().splitlines()[-1])["steps"])
    assert steps >= 10, "the repair should write in many steps"
    failures = []
    stride = STRIDE[template.backend]
    for crash_at in sorted({*range(1, steps + 1, stride), steps}):
        store = template.copy(tmp_path / f"trial-{crash_at}")
        data_dir = store.data_dir
        trial = run_repair(store, crash_at)
        assert trial.returncode == CRASH_EXIT, f"step {crash_at}: {trial.stderr[-3000:]}"
        where = json.loads(trial.stdout.strip().splitlines()[-1])["step"]
        with store.opened() as core:  # recovery at open runs here
            kept = set(memories(core)) | quarantined(data_dir)
            lost = before - kept
            if lost:
                failures.append(f"killed at step {crash_at} ({where}): lost {sorted(lost)}")
            report = repair_stores(core.operator_parts())
            held = memories(core)
            duplicated = {m: n for m, n in held.items() if n != 1}
            if not report.ok or not check_stores(core.operator_parts()).ok or duplicated:
                failures.append(f"killed at step {crash_at} ({where}): the next repair left "
                                f"{[f.to_dict() for f in report.remaining or []]}, duplicates {duplicated}")
            if set(held) | {("globex", UNREBUILDABLE)} != before | {("globex", UNREBUILDABLE)}:
                failures.append(f"killed at step {crash_at} ({where}): after the next repair the store holds "
                                f"{sorted(set(held) ^ before)} differently")
            try:
                assert_no_secret_left(core)
            except AssertionError as exc:
                failures.append(f"killed at step {crash_at} ({where}): after the next repair {exc}")
        store.remove()
    assert not failures, "\n".join(failures)
