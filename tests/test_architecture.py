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


def test_memory_core_and_graph_never_import_tools() -> None:
    bad = [(p, m) for pkg in ("memory_core", "graph") for p, m in imported_modules(pkg)
           if m == "tools" or m.startswith("tools.")]
    assert bad == []


def test_graph_does_not_depend_on_the_service_layer() -> None:
    bad = [(p, m) for p, m in imported_modules("graph") if m.startswith("memory_core")]
    assert bad == []


def test_importing_memory_core_does_not_import_litellm_or_chromadb() -> None:
    code = "import sys, memory_core; print('litellm' in sys.modules, 'chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]
