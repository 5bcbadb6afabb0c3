"""The data directory's lock survives its lock file being deleted or replaced.

The lock that keeps a second process out is held on the data directory itself (an flock on
its descriptor), which no ``rm`` of a file inside it can take away. The lock file
(``memory-core.lock``, holding the owner's pid) is checked before every write: when it was
removed or replaced, the owner recreates and relocks it, and refuses the write with
STORE_LOCKED if someone else already holds the new file.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.dir_lock import LOCK_FILE
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from testbed.paths import ROOT

BIN = Path(sys.executable).with_name("memory-core")
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")},
       "MEMORY_CORE_EMBEDDING_PROVIDER": "hash", "PYTHONPATH": str(ROOT)}

OPENER = """
import json, sys
from memory_core import MemoryCore, MemoryCoreError
from memory_core.settings import load_settings
from memory_core.embedding.local import HashEmbedder
settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
try:
    core = MemoryCore.open(sys.argv[1], settings=settings, embedder=HashEmbedder())
except MemoryCoreError as exc:
    print(json.dumps({"opened": False, "code": exc.code}))
else:
    core.add_memory("acme", "s1", "intruder", "a second writer got in")
    core.close()
    print(json.dumps({"opened": True}))
"""


def open_here(data_dir: Path) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())


def open_elsewhere(data_dir: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", OPENER, str(data_dir)], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
def test_a_second_process_is_refused_after_the_lock_file_is_deleted(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_here(data_dir) as core:
        core.add_memory("acme", "s1", "owner", "written by the owner")
        (data_dir / LOCK_FILE).unlink()
        assert open_elsewhere(data_dir) == {"opened": False, "code": "STORE_LOCKED"}
        assert core._graph.count("acme") == 1


@pytest.mark.slow
def test_the_cli_is_refused_after_the_lock_file_is_deleted(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_here(data_dir) as core:
        (data_dir / LOCK_FILE).unlink()
        proc = subprocess.run([str(BIN), "add", "-t", "acme", "-s", "s1", "-a", "cli", "sneaky", "--json",
                               "--data-dir", str(data_dir)], capture_output=True, text=True, env=ENV, cwd=ROOT,
                              timeout=120, check=False)
        assert proc.returncode == 4, (proc.stdout, proc.stderr)
        assert json.loads(proc.stdout)["error"]["code"] == "STORE_LOCKED"
        assert core._graph.count("acme") == 0


@pytest.mark.slow
def test_the_owner_recreates_a_deleted_lock_file_on_its_next_write(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    lock_file = data_dir / LOCK_FILE
    with open_here(data_dir) as core:
        lock_file.unlink()
        core.add_memory("acme", "s1", "owner", "still the owner")
        assert lock_file.read_text() == str(os.getpid())
        with lock_file.open("a") as fh, pytest.raises(BlockingIOError):  # and it is locked again
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert open_elsewhere(data_dir) == {"opened": False, "code": "STORE_LOCKED"}


def test_a_write_is_refused_when_someone_else_holds_a_replaced_lock_file(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    lock_file = data_dir / LOCK_FILE
    with open_here(data_dir) as core:
        core.add_memory("acme", "s1", "owner", "before")
        lock_file.unlink()
        with lock_file.open("a") as other:  # what an older memory-core, locking only the file, would do
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with pytest.raises(MemoryCoreError) as info:
                core.add_memory("acme", "s1", "owner", "refused")
            assert info.value.code == "STORE_LOCKED"
            assert len(core.query_recent_turns("acme", "s1").turns) == 1  # reads keep answering
        core.add_memory("acme", "s1", "owner", "the other holder let go")
        assert core._graph.count("acme") == 2


@pytest.mark.slow
def test_closing_releases_the_directory_lock(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_here(data_dir):
        pass
    assert open_elsewhere(data_dir) == {"opened": True}
