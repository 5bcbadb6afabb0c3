"""``memory-core`` works from a project with its own ``tools/`` and ``graph/`` packages (issue 39).

A coding agent launches its MCP servers from the project it works in; such a project often has a
``tools`` or ``graph`` package, in its working directory and on its ``PYTHONPATH``. Every test here
runs the real command from such a directory, whose packages fail loudly if anything imports them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from memory_core import launcher
from testbed.mcp_harness import BASE_ENV, ROOT, Caller
from tests.tools.bridge.test_shared_server import stop_servers
from tools.bridge.locate import server_command

BIN = Path(sys.executable).with_name("memory-core")
CALL_TIMEOUT_S = 120
SHADOWS = ("tools", "graph")


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: ``tools/`` and ``graph/`` packages that refuse to be imported by memory-core."""
    root = tmp_path / "project"
    for name in SHADOWS:
        (root / name / "cli").mkdir(parents=True)
        (root / name / "__init__.py").write_text(f"raise ImportError('the project\\'s own {name} package')\n")
        (root / name / "cli" / "__init__.py").write_text("")
    return root


@pytest.fixture
def data_dir(tmp_path: Path) -> Iterator[Path]:
    root = tmp_path / "data"
    yield root
    stop_servers(root)


def from_project(command: Path, project: Path, data_dir: Path, *extra: str) -> StdioServerParameters:
    """``memory-core serve`` as Claude Code starts it in the project: cwd and PYTHONPATH are the project."""
    return StdioServerParameters(
        command=str(command), args=["serve", "--data-dir", str(data_dir), *extra], cwd=str(project),
        env={**BASE_ENV, "PYTHONPATH": str(project), "MEMORY_CORE_SERVER_SHARED_IDLE_S": "3"},
    )


async def add_then_recall(params: StdioServerParameters) -> None:
    with anyio.fail_after(CALL_TIMEOUT_S):
        async with Client(params) as client:
            acme = Caller(client, "acme")
            added = await acme.ok("add_memory", session="s1", agent="coder", content="the release ships on friday")
            found = await acme.ok("recall", query="when does the release ship")
            assert added["ref"] in [row["ref"] for row in found["messages"]]


@pytest.mark.anyio
async def test_stdio_server_through_the_shared_server_starts_from_a_project_with_tools_and_graph(
    project: Path, data_dir: Path,
) -> None:
    await add_then_recall(from_project(BIN, project, data_dir))
    assert (data_dir / "mcp-server.log").exists()  # the bridge started the background server: it ran too


@pytest.mark.anyio
async def test_in_process_stdio_server_starts_from_a_project_with_tools_and_graph(
    project: Path, data_dir: Path,
) -> None:
    await add_then_recall(from_project(BIN, project, data_dir, "--exclusive"))


def test_python_m_memory_core_ignores_the_working_directory_and_pythonpath(project: Path, tmp_path: Path) -> None:
    env = {**os.environ, **BASE_ENV, "PYTHONPATH": str(project)}
    out = subprocess.run([sys.executable, "-m", "memory_core", "stats", "-t", "acme", "--data-dir",
                          str(tmp_path / "data"), "--json"], cwd=project, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert '"tenant":"acme"' in out.stdout.replace(" ", "")


def test_every_process_memory_core_starts_runs_isolated_from_the_working_directory(tmp_path: Path) -> None:
    argv = server_command(tmp_path, None)  # the shared background server: the one process it starts
    assert argv[:4] == [sys.executable, "-P", "-m", "memory_core"]


def test_pinning_replaces_a_foreign_tools_package_already_imported(project: Path) -> None:
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import graph.cli\n"
             "from memory_core import launcher; launcher.pin_own_packages()\n"
             "import tools.cli.app, graph.api; print(tools.__file__); print(graph.__file__)")
    # the project's graph imports (its __init__ raises for tools only, here)
    (project / "graph" / "__init__.py").write_text("")
    out = subprocess.run([sys.executable, "-P", "-c", probe, str(project)], capture_output=True, text=True,
                         timeout=120, check=True)
    assert [Path(line).parent.parent for line in out.stdout.split()] == [launcher.install_root()] * 2


@pytest.mark.slow
@pytest.mark.anyio
async def test_uv_tool_install_gives_a_command_that_serves_from_a_project_with_tools_and_graph(
    project: Path, data_dir: Path, tmp_path: Path,
) -> None:
    uv = Path(sys.executable).with_name("uv")
    if not uv.exists():
        pytest.skip("uv is not installed in this venv")
    source = tmp_path / "checkout"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".venv", ".git", ".memory-core", "__pycache__", "build", "*.egg-info", ".mypy_cache", ".ruff_cache"))
    tool_dir, bin_dir = tmp_path / "uv-tools", tmp_path / "uv-bin"
    env = {**os.environ, "UV_TOOL_DIR": str(tool_dir), "UV_TOOL_BIN_DIR": str(bin_dir)}
    out = subprocess.run([str(uv), "tool", "install", "--quiet", "--python", sys.executable, str(source)],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    command = bin_dir / "memory-core"
    assert command.exists()
    installed = subprocess.run([str(tool_dir / "memory-core" / "bin" / "python"), "-c",
                                "import importlib.metadata as m; print(*(d.metadata['Name'].lower() "
                                "for d in m.distributions()))"], capture_output=True, text=True, check=True)
    heavy = [n for n in installed.stdout.split() if n in ("torch", "triton") or n.startswith("nvidia")]
    assert heavy == [], installed.stdout
    await add_then_recall(from_project(command, project, data_dir))
