"""Two processes on one data directory: the second is refused at open, with the fix in the message.

Cooperating writers over one embedded directory are a known way to lose or corrupt data
(other memory servers do); memory-core refuses the second opener instead and tells the
operator to run one ``memory-core serve --http`` for every agent.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from testbed.paths import ROOT

# A second process: opens the directory, reports, then keeps it open until told to close.
HOLDER = """
import json, sys
from memory_core import MemoryCore, MemoryCoreError
from memory_core.settings import load_settings
from memory_core.embedding.local import HashEmbedder
settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
try:
    core = MemoryCore.open(sys.argv[1], settings=settings, embedder=HashEmbedder())
except MemoryCoreError as exc:
    print(json.dumps({"opened": False, "code": exc.code, "message": exc.message}), flush=True)
    sys.exit(0)
ref = core.add_memory("acme", "s1", "holder", "written by the holder").ref
print(json.dumps({"opened": True, "ref": ref}), flush=True)
for line in sys.stdin:
    if line.strip() == "count":
        print(json.dumps({"count": core._graph.count("acme")}), flush=True)
    elif line.strip() == "close":
        break
core.close()
print(json.dumps({"closed": True}), flush=True)
"""


def open_here(data_dir: Path) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    return MemoryCore.open(data_dir, settings=settings, embedder=HashEmbedder())


class Holder:
    """The other process, driven line by line over its stdin/stdout."""

    def __init__(self, data_dir: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(data_dir)], cwd=ROOT, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )
        self.first = self.read()

    def read(self) -> dict[str, object]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"the other process ended: {self.proc.communicate()[1][-3000:]}")
        return dict(json.loads(line))

    def ask(self, command: str) -> dict[str, object]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate(timeout=30)


@contextmanager
def holder(data_dir: Path) -> Iterator[Holder]:
    h = Holder(data_dir)
    try:
        yield h
    finally:
        h.stop()


def assert_refused_with_the_fix(exc: MemoryCoreError) -> None:
    assert exc.code == "STORE_LOCKED"
    assert "memory-core serve --http" in exc.message


def test_second_process_is_refused_while_another_holds_the_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with holder(data_dir) as other:
        assert other.first["opened"] is True
        with pytest.raises(MemoryCoreError) as info:
            open_here(data_dir)
        assert_refused_with_the_fix(info.value)
        assert other.ask("count") == {"count": 1}  # the refused open disturbed nothing


def test_process_opening_second_is_refused_when_this_one_holds_the_directory(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_here(data_dir) as core:
        core.add_memory("acme", "s1", "here", "written here first")
        with holder(data_dir) as other:
            assert other.first["opened"] is False
            assert other.first["code"] == "STORE_LOCKED"
            assert "memory-core serve --http" in str(other.first["message"])
        assert core._graph.count("acme") == 1
        core.add_memory("acme", "s1", "here", "still writable after the refusal")


def test_directory_opens_again_once_the_first_process_closes_it(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with holder(data_dir) as other:
        ref = other.first["ref"]
        assert other.ask("close") == {"closed": True}
        other.proc.wait(30)
    with open_here(data_dir) as core:
        found = core.get_contents("acme", [str(ref)])
        assert [row.content for row in found.found] == ["written by the holder"]


def test_a_killed_holder_does_not_leave_the_directory_locked(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with holder(data_dir) as other:
        assert other.first["opened"] is True
        other.proc.kill()  # SIGKILL: no close(), the OS drops its lock
        other.proc.wait(30)
    with open_here(data_dir) as core:
        assert core._graph.count("acme") == 1


def test_second_open_in_the_same_process_is_refused_too(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with open_here(data_dir):
        with pytest.raises(MemoryCoreError) as info:
            open_here(data_dir)
        assert_refused_with_the_fix(info.value)
    with open_here(data_dir) as core:  # released by close()
        assert core._graph.count("acme") == 0
