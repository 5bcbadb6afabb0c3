"""A real full disk (a 20 MB tmpfs): adds fail with a code, reads keep answering, nothing
hangs, and writes work again once space returns — without a restart.

Needs root (mount); skipped cleanly where mounting is not permitted. The scenarios run in
child processes (tests/support/disk_full.py) with a timeout, because the hang this guards
against (embedded Chroma blocking forever after failed compactions) holds the GIL.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.settings import load_settings
from testbed.paths import ROOT
from tests.support.store_checks import assert_stores_agree

BIN = Path(sys.executable).with_name("memory-core")
STORE_CODES = {"STORE_ERROR", "STORE_FULL", "STORE_UNAVAILABLE", "STORE_READ_ONLY"}
CHILD_TIMEOUT_S = 240


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=20m", "tmpfs", str(disk)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True, check=False)


def child(mode: str, disk: Path) -> dict[str, object]:
    try:
        proc = subprocess.run([sys.executable, "-m", "tests.support.disk_full", mode, str(disk)], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                              timeout=CHILD_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the store hung on the full disk: {str(exc.stderr)[-3000:]}") from exc
    assert proc.returncode == 0, proc.stderr[-3000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def fill(disk: Path) -> None:
    st = os.statvfs(disk)
    with (disk / "filler").open("wb") as fh:
        fh.write(b"x" * (st.f_bavail * st.f_frsize))


def test_embedded_chroma_failing_on_a_full_disk_never_hangs_and_writes_again_once_freed(small_disk: Path) -> None:
    outcome = child("vectors", small_disk)
    assert outcome["written"], outcome
    assert len(outcome["errors"]) == 8 and set(outcome["errors"]) <= STORE_CODES, outcome  # type: ignore[arg-type]
    assert outcome["resets"], "the failed embedded client was never rebuilt"
    assert outcome["after"] == "after the disk was freed"


def test_a_full_disk_fails_adds_with_a_code_and_adds_work_again_once_space_returns(
    small_disk: Path, tmp_path: Path
) -> None:
    outcome = child("core", small_disk)
    codes = dict(outcome["codes"])  # type: ignore[call-overload]
    assert codes and set(codes) <= STORE_CODES, outcome
    assert outcome["reads"] == {"recent": 5, "recall": 3, "contents": 5}, outcome
    acked = set(json.loads((tmp_path / "acks.json").read_text()))
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    with MemoryCore.open(small_disk / "data", settings=settings, embedder=HashEmbedder()) as core:
        views = assert_stores_agree(core)  # recovery at open cleared what the refused adds left
        assert acked <= views["acme"].graph, f"lost acknowledged adds: {sorted(acked - views['acme'].graph)}"


def test_opening_a_store_on_a_full_disk_is_a_coded_error_and_holds_nothing(small_disk: Path) -> None:
    fill(small_disk)
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "hash"}})
    with pytest.raises(MemoryCoreError) as info:
        MemoryCore.open(small_disk / "data", settings=settings, embedder=HashEmbedder())
    assert info.value.code in STORE_CODES, info.value.message
    (small_disk / "filler").unlink()
    with MemoryCore.open(small_disk / "data", settings=settings, embedder=HashEmbedder()) as core:
        core.add_memory("acme", "s1", "a", "the failed open released everything")


def test_the_cli_on_a_full_disk_exits_with_a_store_code_not_a_traceback(small_disk: Path) -> None:
    fill(small_disk)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMORY_CORE_")},
           "MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}
    proc = subprocess.run([str(BIN), "add", "-t", "acme", "-s", "s1", "-a", "cli", "hello", "--data-dir",
                           str(small_disk / "data")], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=120, check=False)
    assert proc.returncode == 4, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("memory-core: STORE_"), proc.stderr
