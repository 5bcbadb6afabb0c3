"""The ``memory-core`` command's entry point: our own ``graph`` and ``tools``, whatever else is on the path.

The wheel installs three top-level packages: ``memory_core``, ``graph`` and ``tools`` (the layout
is fixed by the product's design card). ``graph`` and ``tools`` are common names: a project an
agent works in often has its own, and ``PYTHONPATH`` (or the working directory, for ``python -c``
and ``python -m``) comes before site-packages, so ``import tools.cli`` would find the project's
package and the command would die with ``No module named 'tools.cli'``.

:func:`main` binds both names to the packages installed beside this one before anything imports
them; the rest of the import path is left as the user set it (a ``PYTHONPATH`` may be how a
Python environment finds its libraries). Every process memory-core starts runs this entry point
with ``python -P -m memory_core`` (tools/bridge/locate.py), so the working directory is never
on its path either.

This module is the one place ``memory_core`` imports ``tools``: it is the process's entry point,
not part of the core (tests/test_architecture.py names it as the exception).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

OWN_PACKAGES = ("graph", "tools")


def install_root() -> Path:
    """The folder holding this installation's ``memory_core`` (site-packages, or the checkout of an
    editable install), where its ``graph`` and ``tools`` sit beside it."""
    return Path(__file__).resolve().parent.parent


def pin_own_packages(root: Path | None = None) -> None:
    """Import ``graph`` and ``tools`` from ``root`` (default: :func:`install_root`), so that every later
    ``import tools.…`` resolves inside them, even with same-named packages earlier on ``sys.path``.

    A package already imported from ``root`` is left as it is; one imported from elsewhere is
    replaced (with its submodules), since nothing of ours may run on it."""
    root = root or install_root()
    for name in OWN_PACKAGES:
        folder = root / name
        init = folder / "__init__.py"
        if not init.is_file():  # an unusual layout (a zip, a frozen app): the normal import applies
            continue
        loaded = sys.modules.get(name)
        if loaded is not None and _is_from(loaded, folder):
            continue
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]
        spec = importlib.util.spec_from_file_location(name, init, submodule_search_locations=[str(folder)])
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)


def _is_from(module: object, folder: Path) -> bool:
    paths = getattr(module, "__path__", None) or []
    return any(Path(p).resolve() == folder.resolve() for p in paths)


def drop_working_directory() -> None:
    """Take the working directory off ``sys.path`` where ``python -m`` put it (not under ``-P``)."""
    if sys.flags.safe_path or not sys.path:
        return
    first = sys.path[0]
    if first == "" or Path(first).resolve() == Path(os.getcwd()).resolve():
        del sys.path[0]


def main() -> None:
    """Console-script entry point (``memory-core``).

    ``memory-core hook`` goes straight to its module, before Typer and the other commands load: a
    harness runs it on every event and waits for it (see :mod:`tools.cli.hook`)."""
    pin_own_packages()
    if sys.argv[1:2] == ["hook"]:
        from tools.cli.hook import main as hook_main

        hook_main(sys.argv[2:])
    from tools.cli.app import main as cli_main

    cli_main()
