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

The same damage, kills and assertions run over SQLite and over PostgreSQL (with embedded
Chroma, so a copy of the data directory plus a copy of the database, ``CREATE DATABASE ...
TEMPLATE``, is a copy of the store). ``make test`` kills the PostgreSQL repair at every third
step (and the last); ``MEMORY_CORE_RELIABILITY=long`` at every step.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memory_core import MemoryCore
from memory_core.operator.doctor import check, repair
from tests.support.agreement import assert_stores_agree
from tests.support.repair_crash import CRASH_EXIT, open_store
from tests.support.sqlite import sqlite_db
from tests.support.store_checks import LONG

BACKENDS = ("sqlite", "postgres")
STRIDE = {"sqlite": 1, "postgres": 1 if LONG else 3}  # which steps a kill tries: every STRIDE-th (and the last)
ROOT = Path(__file__).resolve().parent.parent
GHOST = {"session": "s9", "agent": "ghost", "type": "note", "ts_us": 1_760_000_000_000_000,
         "visibility": "tenant", "salience": 0.6, "project_id": "", "kind": "memory"}
UNREBUILDABLE = "half a record"

Memory = tuple[str, str]  # (tenant, content)


@dataclass(frozen=True)
class Store:
    """A damaged store that can be copied: its data directory and, on PostgreSQL, its database."""

    backend: str
    data_dir: Path
    admin_dsn: str = ""
    dbname: str = ""

    @property
    def storage(self) -> dict[str, Any]:
        if self.backend == "sqlite":
            return {}
        from tests.support.postgres import with_dbname

        return {"graph": "postgres", "postgres_dsn": with_dbname(self.admin_dsn, self.dbname)}

    def copy(self, data_dir: Path) -> Store:
        shutil.copytree(self.data_dir, data_dir)
        if self.backend == "sqlite":
            return Store(self.backend, data_dir)
        from psycopg.conninfo import conninfo_to_dict

        from tests.support.postgres import fresh_database

        copied = conninfo_to_dict(fresh_database(self.admin_dsn, template=self.dbname))["dbname"]
        return Store(self.backend, data_dir, self.admin_dsn, str(copied))

    def remove(self) -> None:
        shutil.rmtree(self.data_dir)
        if self.backend != "sqlite":
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.admin_dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(self.dbname)))

    @contextmanager
    def opened(self) -> Iterator[MemoryCore]:
        with open_store(self.data_dir, self.storage) as core:
            yield core


def delete_rows(core: MemoryCore, ids: list[int]) -> None:
    """Rows gone from the graph store behind the service's back (a bad restore, a hand edit)."""
    if sqlite_db(core) is not None:
        with sqlite_db(core).transaction() as cur:
            cur.executemany("DELETE FROM memories WHERE id = ?", [(i,) for i in ids])
        return
    import psycopg

    with psycopg.connect(core.settings.storage.postgres_dsn, autocommit=True) as conn:
        conn.execute("DELETE FROM memories WHERE id = ANY(%s)", [ids])


def damage(core: MemoryCore) -> None:
    """Plant one of each problem a repair fixes by writing (not only by reading)."""
    refs = {}
    for tenant in ("acme", "globex"):
        for text in ("planting apple trees", "pruning the pear orchard", "harvest plans for plums",
                     "ship the cider on friday"):
            refs[tenant, text] = core.add_memory(tenant, "s1", "alice", f"{tenant}: {text}").ref
    episode = core.summarize_session("acme", "s1")
    only_copies = [refs["acme", "planting apple trees"], refs["globex", "harvest plans for plums"]]
    delete_rows(core, [int(r.split(":")[1]) for r in only_copies])  # the Chroma record becomes the only copy
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
    """Every memory either store holds: graph rows, plus Chroma records that have no row."""
    rows = [(m.node.id, m.node.tenant, m.content) for tenant in core.maintenance.tenants_present()
            for m in core.maintenance.memory_rows(tenant)]
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


def run_repair(store: Store, crash_at: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tests.support.repair_crash", str(store.data_dir), str(crash_at),
                           json.dumps(store.storage)],
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                          timeout=300, check=False)


@pytest.fixture(scope="module", params=BACKENDS)
def damaged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, set[Memory]]:
    data_dir = tmp_path_factory.mktemp("damaged") / "data"
    if request.param == "sqlite":
        template = Store("sqlite", data_dir)
    else:
        from psycopg.conninfo import conninfo_to_dict

        from tests.support.postgres import fresh_database

        admin = request.getfixturevalue("postgres_dsn")
        template = Store("postgres", data_dir, admin, str(conninfo_to_dict(fresh_database(admin))["dbname"]))
    with template.opened() as core:
        damage(core)
        before = set(memories(core))
        assert {f.kind for f in check(core).findings} >= {"vector_orphan", "vector_missing", "vector_stale",
                                                          "lexical_stale", "dangling_edge"}
    return template, before


def test_a_repair_run_to_completion_restores_every_memory(damaged: tuple[Store, set[Memory]], tmp_path: Path) -> None:
    template, before = damaged
    store = template.copy(tmp_path / "data")
    data_dir = store.data_dir
    done = run_repair(store, 0)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1])["ok"] is True
    with store.opened() as core:
        assert check(core).ok
        held = memories(core)
        assert {m: n for m, n in held.items() if n != 1} == {}
        assert set(held) == before - {("globex", UNREBUILDABLE)}
        assert ("globex", UNREBUILDABLE) in quarantined(data_dir)
        assert_stores_agree(core)


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
            report = repair(core)
            held = memories(core)
            duplicated = {m: n for m, n in held.items() if n != 1}
            if not report.ok or not check(core).ok or duplicated:
                failures.append(f"killed at step {crash_at} ({where}): the next repair left "
                                f"{[f.to_dict() for f in report.remaining or []]}, duplicates {duplicated}")
            if set(held) | {("globex", UNREBUILDABLE)} != before | {("globex", UNREBUILDABLE)}:
                failures.append(f"killed at step {crash_at} ({where}): after the next repair the store holds "
                                f"{sorted(set(held) ^ before)} differently")
        store.remove()
    assert not failures, "\n".join(failures)
