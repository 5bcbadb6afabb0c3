"""The replicas quickstart (examples/replicas.sh, docs/replicas.md) runs as a user runs it.

It starts its own PostgreSQL, `chroma run` and two `memory-core serve --http` replicas, adds through one
and recalls through the other over MCP with a bearer token, then stops everything. Real processes all the way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.paths import ROOT


@pytest.mark.slow
def test_the_replicas_quickstart_adds_through_one_replica_and_recalls_through_the_other() -> None:
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        pytest.skip("PostgreSQL is not installed (make install)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    env |= {"MEMCORE_BIN": str(Path(sys.executable).with_name("memory-core")),
            "MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}  # the quickstart's steps, without loading a model twice
    out = subprocess.run(["bash", str(ROOT / "examples" / "replicas.sh")], env=env, capture_output=True, text=True,
                         timeout=900, cwd="/")  # a directory PostgreSQL's unprivileged user may enter
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.splitlines()
    added = next(line for line in lines if line.startswith("added through replica 1: "))
    recalled = next(line for line in lines if line.startswith("recalled through replica 2: "))
    assert added.rsplit(" ", 1)[1] == recalled.split(": ", 1)[1].split(" ", 1)[0]
    assert "The release moved to Friday" in recalled
    work = Path(next(line for line in lines if line.startswith("tokens file: ")).split(": ", 1)[1].split(" ")[0]).parent
    assert work.name.startswith("memory-core-replicas-") and not work.exists()  # stopped and deleted
    leftovers = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True)
    assert leftovers.stdout.strip() == ""  # no server left behind


@pytest.mark.slow
def test_a_replica_that_exits_at_once_is_reported_at_once_with_its_error() -> None:
    """A replica refusing its configuration (here a bad setting; in the field, the `postgres` extra missing)
    ends the quickstart with the replica's own error, not after the 300 s it would wait for a live one."""
    pytest.importorskip("psycopg", reason="the 'postgres' extra is not installed")
    if not (shutil.which("initdb") or list(Path("/usr/lib/postgresql").glob("*/bin/initdb"))):
        pytest.skip("PostgreSQL is not installed (make install)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")}
    env |= {"MEMCORE_BIN": str(Path(sys.executable).with_name("memory-core")),
            "MEMORY_CORE_RECALL_PREVIEW_CHARS": "banana"}  # reaches the replicas only: the other steps ignore it
    started = time.monotonic()
    out = subprocess.run(["bash", str(ROOT / "examples" / "replicas.sh")], env=env, capture_output=True, text=True,
                         timeout=900, cwd="/")
    assert out.returncode != 0
    assert "replica 1 exited before it started" in out.stderr, out.stderr[-3000:]
    assert "CONFIG_INVALID" in out.stderr and "recall.preview_chars" in out.stderr
    assert time.monotonic() - started < 240  # PostgreSQL and Chroma start; the 300 s wait for the replica never runs
    kept = next(line for line in out.stdout.splitlines() if line.startswith("kept "))
    shutil.rmtree(kept.split(" ", 1)[1], ignore_errors=True)  # the logs were kept for the operator
