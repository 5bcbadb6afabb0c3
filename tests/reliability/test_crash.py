"""A writer process SIGKILLed at random instants loses no acknowledged add and leaves no half-memory.

Each trial starts ``tests.support.crash_writer`` on the same data directory (so later
trials also open, and recover, what earlier kills left), kills it at a random moment —
sometimes while it is still starting up and recovering, mostly in the middle of
concurrent single and batch adds, the single ones written in batches formed from concurrent
callers (group commit) — and then (after most trials, and always at the end)
reopens the store in a fresh process that checks every acknowledged write against both
stores (see ``crash_writer.verify``).

The same trials and assertions run over each store a deployment can use: SQLite with embedded
Chroma (the default), PostgreSQL with embedded Chroma (the data directory's lock is still taken,
so the next opener knows the killed writer is gone), and PostgreSQL with a Chroma server (a
replica: no lock, so the killed writer's in-flight entries wait for their lease to expire before
anyone recovers them; the test waits that long before it checks). ``MEMORY_CORE_RELIABILITY=long``
runs 20 trials per store instead of 5 (SQLite) or 3 (PostgreSQL).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from testbed.paths import ROOT
from tests.support.backends import STORES, store_backends
from tests.support.crash_writer import read_acks
from tests.support.store_checks import LONG

BACKENDS = store_backends("persistent", "postgres-embedded", "postgres")
TRIALS = {"persistent": 20 if LONG else 5, "postgres-embedded": 20 if LONG else 3, "postgres": 20 if LONG else 3}
STARTUP_TIMEOUT_S = 60.0
LEASE_S = 1.0  # the replica's journal lease (the smallest allowed): a killed writer's entries wait this long


def storage_of(backend: str, data_dir: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    """The storage settings of ``backend``: a fresh database on the session's PostgreSQL server and,
    for a replica, a collection prefix of this test's own on the session's Chroma server."""
    spec = STORES[backend]
    if spec.graph == "sqlite":
        return {}
    from testbed.postgres import fresh_database

    # embedded Chroma keeps the default lease: the directory's lock, not a lease, says the writer is gone
    storage: dict[str, Any] = {"graph": "postgres", "postgres_dsn": fresh_database(request.getfixturevalue(
        "postgres_dsn"))}
    if spec.vectors == "http":
        host, port = request.getfixturevalue("chroma_server")
        storage.update(chroma="http", chroma_host=host, chroma_port=port, postgres_lease_s=LEASE_S,
                       collection_prefix="c" + format(abs(hash(str(data_dir))) % 10**12, "d"))
    return storage


def spawn(*args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.crash_writer", *args], cwd=ROOT, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )


def acked_adds(ack_file: Path) -> int:
    return sum(1 for a in read_acks(ack_file) if a.get("op") == "add")


def kill_at_random(proc: subprocess.Popen[bytes], ack_file: Path, rng: random.Random, early: bool) -> str:
    """SIGKILL the writer: during start-up (``early``), or after some more acknowledged adds."""
    if early:
        delay = rng.uniform(0.3, 1.8)  # imports take ~0.8 s; open and recovery follow
        time.sleep(delay)
        how = f"{delay:.2f}s after start"
    else:
        start_count = acked_adds(ack_file)
        target = start_count + rng.randint(5, 400)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while acked_adds(ack_file) < target and time.monotonic() < deadline:
            assert proc.poll() is None, f"the writer died on its own: {proc.communicate()[1].decode()[-3000:]}"
            time.sleep(0.01)
        assert time.monotonic() < deadline, f"the writer made no progress past {acked_adds(ack_file)} adds " \
            f"(wanted {target}):\n{stalled_writer_stacks(proc)}"
        jitter = rng.uniform(0.0, 0.03)
        time.sleep(jitter)
        how = f"after ~{target - start_count} acknowledged adds (+{jitter * 1000:.0f} ms)"
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    return how


def stalled_writer_stacks(proc: subprocess.Popen[bytes]) -> str:
    """Where a stalled writer's threads are (faulthandler on SIGUSR1), then the writer is killed."""
    proc.send_signal(signal.SIGUSR1)
    time.sleep(2.0)
    proc.send_signal(signal.SIGKILL)
    return proc.communicate(timeout=30)[1].decode(errors="replace")[-8000:]


def verify(data_dir: Path, ack_file: Path, storage: dict[str, Any]) -> dict[str, object]:
    if storage.get("chroma") == "http":  # a replica recovers a dead one's entries once their lease ran out
        time.sleep(LEASE_S + 0.2)
    proc = spawn("--verify", str(data_dir), str(ack_file), "--storage", json.dumps(storage))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-5000:]
    return dict(json.loads(out.decode().strip().splitlines()[-1]))


@pytest.mark.timeout(2400 if LONG else 600)
@pytest.mark.parametrize("backend", BACKENDS)
def test_sigkilled_writer_loses_no_acknowledged_add_and_leaves_no_half_written_memory(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    seed = int(os.environ.get("MEMORY_CORE_CRASH_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    data_dir, ack_file = tmp_path / "data", tmp_path / "acks.jsonl"
    storage = storage_of(backend, data_dir, request)
    history: list[str] = []
    for trial in range(TRIALS[backend]):
        early = trial > 0 and rng.random() < 0.25
        writer = spawn(str(data_dir), str(ack_file), "--seed", str(seed + trial), "--storage", json.dumps(storage))
        how = kill_at_random(writer, ack_file, rng, early)
        # Now and then skip the check, so the next writer itself opens (and may be killed
        # while it recovers) what this kill left behind.
        summary = verify(data_dir, ack_file, storage) if rng.random() < 0.7 else "not checked yet"
        history.append(f"trial {trial}: killed {how}; {summary}")
        print(history[-1])
    final = verify(data_dir, ack_file, storage)
    assert final["must_exist"] and int(str(final["memories"])) >= int(str(final["must_exist"])), final
    coalesced = [a for a in read_acks(ack_file) if a.get("op") == "batches" and a["rows"] > a["batches"]]
    assert coalesced, "no batch was ever formed from concurrent single adds: the kills never hit one"
    print(f"seed {seed} (rerun with MEMORY_CORE_CRASH_SEED={seed}):\n" + "\n".join(history))
    print(f"largest batch of concurrent single adds: {max(a['largest'] for a in coalesced)}")
