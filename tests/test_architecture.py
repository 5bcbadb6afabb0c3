"""Dependency direction: the core and the graph never import the boundary layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_modules(package: str) -> set[tuple[str, str]]:
    found = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found |= {(str(path), a.name) for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found.add((str(path), node.module))
    return found


# the process's entry point (the console script, ``python -m memory_core``): it pins our own ``tools``
# package before handing over to the CLI, so it is the one module of memory_core that imports it
LAUNCHER = str(ROOT / "memory_core" / "launcher.py")


def test_memory_core_and_graph_never_import_tools() -> None:
    bad = [(p, m) for pkg in ("memory_core", "graph") for p, m in imported_modules(pkg)
           if (m == "tools" or m.startswith("tools.")) and p != LAUNCHER]
    assert bad == []


def test_the_launcher_imports_tools_only_inside_main() -> None:
    top_level = ast.parse(Path(LAUNCHER).read_text()).body
    names = [n.module for n in top_level if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in top_level if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in names if m and m.split(".")[0] in ("tools", "graph")]


def test_graph_does_not_depend_on_the_service_layer() -> None:
    bad = [(p, m) for p, m in imported_modules("graph") if m.startswith("memory_core")]
    assert bad == []


def test_importing_memory_core_does_not_import_litellm_or_chromadb() -> None:
    code = "import sys, memory_core; print('litellm' in sys.modules, 'chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]
