"""Import budget: the package, the CLI and the stdio bridge load none of the heavy modules.

Checked by the set of modules a fresh interpreter holds after the import (not by timing):
chromadb, onnxruntime, networkx, litellm and numpy load only where they are used, so
``memory-core --help`` and a bridged ``memory-core serve`` start in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from testbed.paths import ROOT

if TYPE_CHECKING:
    from memory_core.settings.schema import Settings

HEAVY = ("chromadb", "onnxruntime", "networkx", "litellm", "numpy", "mcp", "uvicorn", "starlette", "tokenizers")


def loaded_after(code: str, **env: str) -> set[str]:
    """Top-level package names a fresh interpreter holds after running ``code``."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))"
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=environ, cwd=ROOT,
                         timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "code",
    [
        "import memory_core",
        "import memory_core.errors",
        "from memory_core import MemoryCoreError",
        "import tools.cli.app",
        "import tools.bridge.client",
        "import tools.cli.hook, tools.cli.hook_store",
    ],
)
def test_importing_the_package_the_cli_or_the_bridge_loads_no_heavy_module(code: str) -> None:
    assert loaded_after(code) & set(HEAVY) == set()


def test_cli_help_renders_without_loading_pydantic_rich_or_the_store() -> None:
    code = (
        "import sys\nfrom tools.cli.app import app\n"
        "try:\n    app(['--help'], prog_name='memory-core')\nexcept SystemExit:\n    pass"
    )
    assert loaded_after(code) & {*HEAVY, "pydantic", "rich", "graph", "anyio"} == set()


@pytest.mark.slow
def test_opening_a_store_for_reads_loads_neither_chroma_nor_the_embedding_model(tmp_path: Path) -> None:
    code = (
        "from memory_core import MemoryCore\n"
        f"core = MemoryCore.open({str(tmp_path)!r})\n"
        "core.query_recent_turns('acme', 's1')\ncore.close()"
    )
    assert loaded_after(code) & {"chromadb", "onnxruntime", "litellm", "tokenizers"} == set()


def test_the_library_api_still_resolves_through_the_lazy_package() -> None:
    import memory_core

    assert memory_core.MemoryCore.__name__ == "MemoryCore"
    assert issubclass(memory_core.MemoryCoreError, Exception)
    with pytest.raises(AttributeError):
        _ = memory_core.no_such_name  # type: ignore[attr-defined]


@pytest.mark.slow
def test_stats_recent_and_show_answer_from_the_graph_without_opening_chroma(tmp_path: Path) -> None:
    from memory_core import MemoryCore
    from memory_core.embedding.local import HashEmbedder

    with MemoryCore.open(tmp_path, embedder=HashEmbedder(), settings=_hash_settings()) as core:
        core.add_memory("acme", "s1", "alice", "a note for the operator")
    for command in (["stats", "-t", "acme"], ["recent", "-t", "acme", "-s", "s1"], ["show", "mem:1", "-t", "acme"]):
        code = (
            "from tools.cli.app import app\n"
            f"try:\n    app({[*command, '--data-dir', str(tmp_path), '--json']!r}, prog_name='memory-core')\n"
            "except SystemExit as done:\n    assert not done.code, done.code"
        )
        assert "chromadb" not in loaded_after(code, MEMORY_CORE_EMBEDDING_PROVIDER="hash"), command


@pytest.mark.slow
def test_stats_counts_vector_records_when_asked(tmp_path: Path) -> None:
    from memory_core import MemoryCore
    from memory_core.embedding.local import HashEmbedder

    with MemoryCore.open(tmp_path, embedder=HashEmbedder(), settings=_hash_settings()) as core:
        core.add_memory("acme", "s1", "alice", "one")
        core.add_memory("acme", "s1", "alice", "two")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MEMORY_CORE_EMBEDDING_PROVIDER": "hash"}
    run = [sys.executable, "-c", "from tools.cli.app import main; main()", "stats", "-t", "acme",
           "--data-dir", str(tmp_path), "--json"]
    quick = json.loads(subprocess.run(run, capture_output=True, text=True, env=env, check=True, timeout=120).stdout)
    full = json.loads(subprocess.run([*run, "--vectors"], capture_output=True, text=True, env=env, check=True,
                                     timeout=120).stdout)
    assert (quick["memories"], quick["vectors"]) == (2, None)
    assert (full["memories"], full["vectors"]) == (2, 2)


def _hash_settings() -> Settings:
    from memory_core.settings import load_settings

    return load_settings(environ={"MEMORY_CORE_EMBEDDING_PROVIDER": "hash"})
