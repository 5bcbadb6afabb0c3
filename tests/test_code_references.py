"""Docstrings and comments name what exists: the modules, objects and files they cite in backquotes
(``memory_core.vectors.api.index_loaded``, :mod:`graph.pg.counts`, ``graph/sqlite/txn.py``) are
checked against the tree, as ``tests/test_docs.py`` checks the docs; and a comment cites the docs
section that states a rule, not "SPEC" (the product spec is not in the repository).

Names are resolved from the source (``ast``), nothing is imported: the longest prefix that is a
module, then a name its top level defines or imports, then an attribute of a class there.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.paths import ROOT

PACKAGES = ("memory_core", "graph", "tools", "bench", "tests")
SPAN = re.compile(r"(?::[a-z]+:)?`{1,2}~?([^`\s]+?)`{1,2}")
DOTTED = re.compile(rf"^(?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+$")
PATH = re.compile(rf"^(?:{'|'.join(PACKAGES)}|docs)/[\w./-]*\w$")
MCP_METHODS = frozenset({"tools/list", "tools/call"})  # MCP methods, not paths
WRITTEN_BY_RUNS = "bench/results/"  # where benchmarks write their figures: not in the checkout


def sources() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _module_file(dotted: str) -> Path | None:
    where = ROOT.joinpath(*dotted.split("."))
    return next((p for p in (where.with_suffix(".py"), where / "__init__.py") if p.is_file()), None)


def _defined(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a block binds: definitions, assignments, imports, and those of its if/try/with blocks."""
    out: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update((n.id, node) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            out.update(((a.asname or a.name).split(".")[0], node) for a in node.names)
        elif isinstance(node, ast.If | ast.Try | ast.With):
            blocks = [node.body, getattr(node, "orelse", []), getattr(node, "finalbody", [])]
            blocks += [h.body for h in getattr(node, "handlers", [])]
            for block in blocks:
                out.update(_defined(block))
    return out


def _strings(path: Path) -> set[str]:
    return {n.value for n in ast.walk(_tree(path)) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _class_attributes(cls: ast.ClassDef) -> set[str]:
    names = set(_defined(cls.body))
    names.update(n.attr for n in ast.walk(cls) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)
                 and isinstance(n.value, ast.Name) and n.value.id == "self")
    return names


def resolves(dotted: str) -> bool:
    """``graph.pg.counts`` or ``memory_core.vectors.api.index_loaded`` or ``tools.cli.app.app``: exists."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        source = _module_file(".".join(parts[:cut]))
        if source is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        names = _defined(_tree(source).body)
        node = names.get(rest[0])
        if node is None:  # a lazy name (PEP 562) is a string its module's table holds
            return "__getattr__" in names and rest[0] in _strings(source)
        if len(rest) == 1 or not isinstance(node, ast.ClassDef):
            return True  # an attribute of an instance or an imported object: not followed
        return rest[1] in _class_attributes(node)
    return False


def _texts(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every docstring and comment of the file."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "lineno", 1), doc
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if "#" in line:
            yield number, line[line.index("#"):]


def missing(span: str) -> bool:
    if DOTTED.match(span) and not span.endswith(".py"):
        return not resolves(span)
    if PATH.match(span) and span not in MCP_METHODS and not span.startswith(WRITTEN_BY_RUNS):
        return not (ROOT / span).exists()
    return False


def stale_references(path: Path) -> list[str]:
    """What the file's docstrings and comments name that the tree (``ROOT``) does not hold."""
    where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
    found = []
    for line, text in _texts(path):
        for span in SPAN.findall(text):
            span = span.split("(")[0].rstrip(".,")
            if missing(span):
                found.append(f"{where}:{line} names {span}, which does not exist")
    return found


def test_docstrings_and_comments_name_modules_objects_and_files_that_exist() -> None:
    assert [s for path in sources() for s in stale_references(path)] == []


def test_comments_cite_the_docs_not_the_spec() -> None:
    cited = [f"{path.relative_to(ROOT)}:{line}" for path in sources() if not path.is_relative_to(ROOT / "tests")
             for line, text in _texts(path) if re.search(r"\bSPEC\b", text)]
    assert cited == []


@pytest.mark.parametrize("text", ["see :mod:`memory_core.gone`", "``graph/store.py`` keeps it",
                                  "(:func:`memory_core.vectors.chroma.index_loaded`)",
                                  "``memory_core.embedding.local.Embedder.embed``"])
def test_a_stale_reference_is_caught(tmp_path: Path, text: str) -> None:
    module = tmp_path / "probe.py"
    module.write_text(f'"""{text}"""\n# and a comment: {text}\n', encoding="utf-8")
    assert len(stale_references(module)) == 2


def test_a_reference_that_exists_passes(tmp_path: Path) -> None:
    module = tmp_path / "probe.py"
    module.write_text('"""Reads :func:`memory_core.vectors.api.index_loaded` (``graph/sqlite/txn.py``) and\n'
                      '``memory_core.embedding.api.Embedder.embed``; answers `tools/list`."""\n', encoding="utf-8")
    assert stale_references(module) == []
