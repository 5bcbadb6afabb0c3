"""The architecture's seams, read from the import statements of every module (``ast``, no import runs).

- ``memory_core`` and ``graph`` never import the boundary layers (``tools``), but for the process's
  entry point (``memory_core.launcher``); ``graph`` never imports ``memory_core``.
- The boundaries (``tools``) import the core only through its public names: ``memory_core``,
  ``memory_core.operator``, ``memory_core.observe`` and ``memory_core.harness`` (their ``__all__``,
  pinned by ``tests/test_public_api.py``), type-only imports included; never ``graph``.
- ``memory_core`` reaches the graph only through its seams: ``graph.api`` (the store's Protocols and
  values), ``graph.maintenance_api`` (doctor's and export's), ``graph.errors`` and ``graph.open``.
- ``memory_core`` imports no database or vector client (``sqlite3``, ``psycopg``, ``chromadb``)
  outside its vector package; the graph backends never import each other.
- No import cycle between the project's units (a package below the top level, or a top-level
  module), nor between the modules of one unit, deferred imports inside functions included;
  ``if TYPE_CHECKING:`` imports are types only.
- ``memory_core`` never names a graph backend (no ``"postgres"`` or ``"sqlite"`` string outside its
  settings, which list the choices): what a backend is and needs comes from the registry
  (``graph.open.BACKENDS``).
- One serving root: ``tools.mcp`` only builds the MCP server, so nothing it loads (its imports and
  theirs) is the stdio bridge, the inspector, a serving process or uvicorn; the stdio bridge
  (``tools.bridge``) never loads the MCP SDK; and nothing imports the serving processes
  (``tools.serve``) but the CLI.
- The observability libraries stay in their one module each: ``prometheus_client`` in
  ``memory_core.observe.metrics``, ``opentelemetry`` in ``memory_core.observe.tracing``.
- One direction outside the product: ``bench`` never imports ``tests``; ``testbed`` (the servers and
  clients both stand up) imports neither; ``tests`` may import both.

Each rule is a function over a source tree, so the last tests show each one failing on a tree with
a deliberate violation.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph.open import BACKENDS
from testbed.paths import ROOT

PACKAGES = ("memory_core", "graph", "tools")
GRAPH_SEAMS = frozenset({"graph.api", "graph.maintenance_api", "graph.errors", "graph.open"})
CLIENTS = frozenset({"sqlite3", "psycopg", "psycopg_pool", "chromadb"})
SETTINGS = "memory_core.settings"  # the one place of memory_core that lists the backends (the setting's choices)
Import = tuple[str, int, str]  # (importing module, line, imported module)


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def parsed(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once per run (every rule reads the same trees)."""
    return _parse(path, path.stat().st_mtime_ns)


@functools.cache
def _parse(path: Path, mtime_ns: int) -> ast.Module:  # mtime_ns: a file rewritten since is read again
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


@functools.cache
def _file_imports(root: Path, path: Path, tree: ast.Module) -> tuple[tuple[int, str, bool], ...]:
    """(line, imported module, type-only) for every import of one file."""
    typing_only = _type_checking_lines(tree)
    found: list[tuple[int, str, bool]] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        types = node.lineno in typing_only
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name, types) for alias in node.names]
            continue
        assert node.level == 0, f"{path}:{node.lineno}: the project uses absolute imports only"
        base = node.module or ""
        found.append((node.lineno, base, types))
        for alias in node.names:  # ``from pkg import module`` imports pkg.module
            if (root / (base.replace(".", "/") + f"/{alias.name}.py")).exists() or (
                    root / base.replace(".", "/") / alias.name / "__init__.py").exists():
                found.append((node.lineno, f"{base}.{alias.name}", types))
    return tuple(found)


def imports(root: Path, packages: tuple[str, ...] = PACKAGES, *, types: bool = False) -> Iterator[Import]:
    """Every import of the tree's modules, relative imports resolved; ``if TYPE_CHECKING:`` blocks
    only with ``types``."""
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module = module_name(root, path)
            for line, target, type_only in _file_imports(root, path, parsed(path)):
                if types or not type_only:
                    yield module, line, target


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


# the process's entry point (the console script, ``python -m memory_core``): it binds our own ``tools``
# package before handing over to the CLI, so it is the one module of memory_core that imports it
LAUNCHER = "memory_core.launcher"


def layer_offences(root: Path) -> list[str]:
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            if ((within(m, "memory_core") or within(m, "graph")) and within(target, "tools") and m != LAUNCHER)
            or (within(m, "graph") and within(target, "memory_core"))]


# what the boundaries may import of the core: its public names, pinned by tests/test_public_api.py
PUBLIC_CORE = frozenset({"memory_core", "memory_core.operator", "memory_core.observe", "memory_core.harness"})


def boundary_offences(root: Path) -> list[str]:
    """``tools`` imports the core through its public packages only (:data:`PUBLIC_CORE`; type-only imports
    too: a boundary names no internal module), and the graph never."""
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root, types=True)
            if within(m, "tools") and (within(target, "memory_core") or within(target, "graph"))
            and target not in PUBLIC_CORE]


def support_offences(root: Path) -> list[str]:
    """One direction between the trees that are not the product: ``bench`` never imports ``tests``, and
    ``testbed`` (what both stand up) imports neither; ``tests`` may import both."""
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root, ("bench", "testbed"), types=True)
            if within(target, "tests") or (within(m, "testbed") and within(target, "bench"))]


def graph_seam_offences(root: Path) -> list[str]:
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            if within(m, "memory_core") and within(target, "graph") and target != "graph"
            and not any(within(target, seam) for seam in GRAPH_SEAMS)]


def client_offences(root: Path) -> list[str]:
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            if within(m, "memory_core") and not within(m, "memory_core.vectors")
            and target.split(".")[0] in CLIENTS]


def backend_offences(root: Path) -> list[str]:
    pairs = (("graph.pg", "graph.sqlite"), ("graph.sqlite", "graph.pg"))
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            for a, b in pairs if within(m, a) and within(target, b)]


def backend_name_offences(root: Path) -> list[str]:
    """Strings of ``memory_core`` (outside its settings) that are a registered backend's name: a
    comparison with ``"postgres"`` is a fact the registry holds (``shared``, ``extra``)."""
    out = []
    for path in sorted((root / "memory_core").rglob("*.py")):
        module = module_name(root, path)
        if within(module, SETTINGS):
            continue
        for node in ast.walk(parsed(path)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in BACKENDS:
                out.append(f"{module}:{node.lineno} names the graph backend {node.value!r}")
    return out


SDK = ("mcp", "mcp_types")  # the MCP Python SDK's packages
NOT_IN_THE_MCP_SERVER = ("tools.bridge", "tools.ui", "tools.serve", "uvicorn")
SERVE_IMPORTERS = ("tools.serve", "tools.cli")


def _with_parents(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: importing a module runs every package above it."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def loads(root: Path) -> dict[str, set[str]]:
    """Every module each module of the tree may load: its imports, theirs (the tree's own modules are
    followed, deferred imports included), and the packages above each."""
    edges: dict[str, set[str]] = {}
    for m, _line, target in imports(root):
        edges.setdefault(m, set()).update(_with_parents(target))
    closure: dict[str, set[str]] = {}
    for start in edges:
        seen: set[str] = set()
        stack = [start]
        while stack:
            for target in edges.get(stack.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        closure[start] = seen
    return closure


def mcp_server_offences(root: Path) -> list[str]:
    return [f"{m} loads {target}" for m, loaded in sorted(loads(root).items()) if within(m, "tools.mcp")
            for target in sorted(loaded) if any(within(target, banned) for banned in NOT_IN_THE_MCP_SERVER)]


def bridge_sdk_offences(root: Path) -> list[str]:
    return [f"{m} loads {target}" for m, loaded in sorted(loads(root).items()) if within(m, "tools.bridge")
            for target in sorted(loaded) if target in SDK]


def serve_importer_offences(root: Path) -> list[str]:
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            if within(target, "tools.serve") and not any(within(m, allowed) for allowed in SERVE_IMPORTERS)]


OBSERVABILITY = {"prometheus_client": "memory_core.observe.metrics", "opentelemetry": "memory_core.observe.tracing"}


def observability_offences(root: Path) -> list[str]:
    return [f"{m}:{line} imports {target}" for m, line, target in imports(root)
            if target.split(".")[0] in OBSERVABILITY and m != OBSERVABILITY[target.split(".")[0]]]


def unit(root: Path, module: str) -> str | None:
    """The unit a module belongs to: its package below the top level, or itself at the top level."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    if len(parts) >= 2 and (root / parts[0] / parts[1] / "__init__.py").exists():
        return ".".join(parts[:2])
    if len(parts) >= 2:
        return ".".join(parts[:2])
    return parts[0]


def cycles(root: Path) -> list[list[str]]:
    """The cycles among units (each once, as a path that ends where it starts)."""
    edges: dict[str, set[str]] = {}
    for m, _line, target in imports(root):
        a, b = unit(root, m), unit(root, target)
        if a and b and a != b and b not in PACKAGES:
            edges.setdefault(a, set()).add(b)
    return _cycles(edges)


def modules(root: Path) -> set[str]:
    return {module_name(root, path) for package in PACKAGES for path in (root / package).rglob("*.py")}


def module_cycles(root: Path) -> list[list[str]]:
    """The cycles among modules inside a unit too (``schema`` loads ``sources`` which loads ``schema``). A
    module's import of a package above it does not count: Python runs that package first anyway."""
    known = modules(root)
    edges: dict[str, set[str]] = {}
    for m, _line, target in imports(root):
        while target and target not in known:  # ``from pkg.mod import name``: the module
            target = target.rpartition(".")[0]
        if target and target != m and not within(m, target):
            edges.setdefault(m, set()).add(target)
    return _cycles(edges)


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []
    seen_cycles: set[frozenset[str]] = set()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt):], nxt]
                if frozenset(cycle) not in seen_cycles:
                    seen_cycles.add(frozenset(cycle))
                    found.append(cycle)
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    return found


def test_memory_core_and_graph_never_import_tools_and_graph_never_imports_memory_core() -> None:
    assert layer_offences(ROOT) == []


def test_the_boundaries_import_the_core_only_through_its_public_names() -> None:
    assert boundary_offences(ROOT) == []


def test_benchmarks_never_import_the_tests_and_the_testbed_imports_neither() -> None:
    assert support_offences(ROOT) == []


def test_memory_core_reaches_the_graph_only_through_its_seams() -> None:
    assert graph_seam_offences(ROOT) == []


def test_memory_core_imports_no_database_or_vector_client_outside_its_vector_package() -> None:
    assert client_offences(ROOT) == []


def test_the_graph_backends_never_import_each_other() -> None:
    assert backend_offences(ROOT) == []


def test_no_import_cycle_between_units() -> None:
    assert cycles(ROOT) == []


def test_no_import_cycle_between_modules() -> None:
    assert module_cycles(ROOT) == []


def test_memory_core_names_no_graph_backend_outside_its_settings() -> None:
    assert backend_name_offences(ROOT) == []


def test_the_mcp_server_loads_neither_the_bridge_the_inspector_a_serving_process_nor_uvicorn() -> None:
    assert mcp_server_offences(ROOT) == []


def test_the_stdio_bridge_never_loads_the_mcp_sdk() -> None:
    assert bridge_sdk_offences(ROOT) == []


def test_only_the_cli_imports_the_serving_processes() -> None:
    assert serve_importer_offences(ROOT) == []


def test_metrics_and_tracing_libraries_are_imported_by_their_one_module_each() -> None:
    assert observability_offences(ROOT) == []


def test_the_launcher_imports_tools_only_inside_main() -> None:
    top_level = parsed(ROOT / "memory_core" / "launcher.py").body
    names = [n.module for n in top_level if isinstance(n, ast.ImportFrom)]
    names += [a.name for n in top_level if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in names if m and m.split(".")[0] in ("tools", "graph")]


def test_importing_memory_core_does_not_import_litellm_or_chromadb() -> None:
    code = "import sys, memory_core; print('litellm' in sys.modules, 'chromadb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == ["False", "False"]


# ---- the rules catch what they are for -----------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Path:
    for package in PACKAGES:
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").touch()
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.parent != root:
            (path.parent / "__init__.py").touch()
        path.write_text(text, encoding="utf-8")
    return root


CLEAN = {"graph/api.py": "", "graph/sqlite/store.py": "from graph.api import x\n",
         "memory_core/service.py": "from graph.api import x\nfrom memory_core.recall import engine\n",
         "memory_core/recall/engine.py": "from memory_core import errors\n", "memory_core/errors.py": "",
         "memory_core/vectors/chroma.py": "import chromadb\n",
         "tools/auth.py": "from mcp.server.auth.provider import AccessToken\n", "tools/registry.py": "",
         "tools/server_record.py": "from memory_core import MemoryCoreError\n",
         "tools/http/guard.py": "import starlette\n",
         "tools/mcp/server.py": "from mcp.server.mcpserver import MCPServer\nfrom tools.auth import AccessToken\n"
                                "from tools.registry import TOOL_SPECS\n",
         "tools/bridge/client.py": "from tools.registry import TOOL_SPECS\nfrom tools.server_record import x\n",
         "tools/serve/http.py": "import uvicorn\nfrom tools.http import guard\nfrom tools.mcp.server import MCPServer\n"
                                "def inspector():\n    from tools.ui import app\n",
         "tools/ui/app.py": "from tools.auth import AccessToken\n",
         "tools/cli/serve.py": "def serve():\n    from tools.serve.http import x\n"
                               "    from tools.bridge.client import y\n",
         "memory_core/settings/schema.py": "GRAPH_CHOICES = ('sqlite', 'postgres')\n",
         "bench/quality/locomo.py": "from testbed.postgres import running_postgres\nfrom memory_core import x\n",
         "testbed/postgres.py": "import subprocess\n"}


@pytest.mark.parametrize(("rule", "violation"), [
    (layer_offences, {"memory_core/reads.py": "from tools.mcp import server\n"}),
    (layer_offences, {"graph/api.py": "import memory_core.errors\n"}),
    (boundary_offences, {"tools/cli/inspect.py": "def stats():\n    from memory_core.operator.stats import x\n"}),
    (boundary_offences, {"tools/mcp/context.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                                 "    from memory_core.service import MemoryCore\n"}),
    (boundary_offences, {"tools/ui/pages.py": "from memory_core import errors\n"}),
    (boundary_offences, {"tools/ui/pages.py": "from graph.api import GraphStore\n"}),
    (graph_seam_offences, {"memory_core/reads.py": "from graph.sqlite.store import SqliteGraphStore\n"}),
    (graph_seam_offences, {"memory_core/reads.py": "def f():\n    from graph.pg import store\n"}),
    (client_offences, {"memory_core/service.py": "import sqlite3\n"}),
    (client_offences, {"memory_core/recall/engine.py": "from chromadb.api import Collection\n"}),
    (backend_offences, {"graph/pg/counts.py": "from graph.sqlite.txn import SEP\n"}),
    (backend_offences, {"graph/sqlite/store.py": "from graph.pg import rows\n"}),
    (cycles, {"memory_core/errors.py": "def f():\n    from memory_core.service import MemoryCore\n"}),
    (module_cycles, {"memory_core/settings/schema.py": "def load():\n    from memory_core.settings import sources\n",
                     "memory_core/settings/sources.py": "from memory_core.settings.schema import Settings\n"}),
    (mcp_server_offences, {"tools/mcp/server.py": "from tools.bridge.client import Bridge\n"}),
    (mcp_server_offences, {"tools/mcp/context.py": "from tools.ui import app\n"}),
    (mcp_server_offences, {"tools/mcp/server.py": "def run():\n    import uvicorn\n"}),
    (mcp_server_offences, {"tools/mcp/context.py": "from tools.http import guard\n",
                           "tools/http/guard.py": "import uvicorn\n"}),
    (bridge_sdk_offences, {"tools/bridge/client.py": "from mcp import Client\n"}),
    (bridge_sdk_offences, {"tools/bridge/lines.py": "from tools.auth import hash_token\n"}),
    (serve_importer_offences, {"tools/mcp/server.py": "from tools.serve.deferred_core import open_core\n"}),
    (serve_importer_offences, {"tools/bridge/client.py": "def f():\n    from tools.serve import bridged\n"}),
    (backend_name_offences, {"memory_core/open.py": "def shared(s):\n    return s.storage.graph == 'postgres'\n"}),
    (backend_name_offences, {"memory_core/extras.py": "DEFAULT = {'graph': 'sqlite'}\n"}),
    (observability_offences, {"tools/serve/http.py": "from prometheus_client import generate_latest\n"}),
    (observability_offences, {"memory_core/recall/engine.py": "def f():\n    from opentelemetry import trace\n"}),
    (support_offences, {"bench/quality/locomo.py": "def f():\n    from tests.support.sqlite import x\n"}),
    (support_offences, {"testbed/postgres.py": "from bench.common import stage\n"}),
], ids=["core->tools", "graph->core", "tools->operator internals", "tools->service for types",
        "tools->core module", "tools->graph", "core->sqlite-backend", "deferred core->pg", "core->sqlite3",
        "recall->chromadb", "pg->sqlite", "sqlite->pg", "deferred cycle", "module cycle", "mcp->bridge", "mcp->ui",
        "deferred mcp->uvicorn", "mcp->uvicorn through http", "bridge->sdk", "bridge->sdk through auth",
        "mcp->serve", "deferred bridge->serve",
        "core names postgres", "core names sqlite", "serve->prometheus", "deferred recall->otel",
        "bench->tests", "testbed->bench"])
def test_each_rule_fails_on_a_tree_that_breaks_it(tmp_path: Path, rule: object, violation: dict[str, str]) -> None:
    assert callable(rule)
    assert rule(_tree(tmp_path / "clean", CLEAN)) == []
    assert rule(_tree(tmp_path / "broken", {**CLEAN, **violation})) != []


def test_type_only_imports_do_not_count(tmp_path: Path) -> None:
    typing_only = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from memory_core.service import X\n"
    assert cycles(_tree(tmp_path, {**CLEAN, "memory_core/errors.py": typing_only})) == []
