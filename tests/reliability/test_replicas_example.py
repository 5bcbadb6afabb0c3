"""The replicas quickstart (examples/replicas.sh, docs/replicas.md) runs as a user runs it.

It starts its own PostgreSQL, `chroma run` and two `memory-core serve --http` replicas, adds through one
and recalls through the other over MCP with a bearer token, then stops everything. Real processes all the way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


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
