"""Importing chromadb under the heavy-import lock, cheaply (see :mod:`memory_core.heavy_imports`).

chromadb decorates ~160 methods with the ``overrides`` package's ``@override``, which checks each
signature against its base class by disassembling bytecode when the class is defined: a fifth of
chromadb's import CPU, for a check its own test suite already makes. And chromadb imports httpx,
whose ``__init__`` imports its command-line client (``httpx.main``: click, rich, pygments) for a
third of chromadb's import time. :func:`chromadb` imports it (and the modules its embedded client
loads on first use) with a marker-only ``@override`` (the ``__override__`` flag ``EnforceOverrides``
looks for) and a placeholder ``httpx._main`` whose ``main`` imports the real one when called; then
the real ``@override`` is back and the placeholder gone (``import httpx._main`` loads the real module).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, TypeVar

from memory_core.heavy_imports import importing

F = TypeVar("F", bound=Callable[..., Any])

CHROMA_CLIENT_MODULES = ("chromadb.api.rust", "chromadb.telemetry.product.posthog")  # loaded by its first client


def chromadb() -> ModuleType:
    """``chromadb``, with the modules its embedded client loads, imported under the import lock
    and without ``overrides``' signature checks (see the module docstring)."""
    import importlib
    import sys

    with importing():
        if "chromadb" in sys.modules and all(name in sys.modules for name in CHROMA_CLIENT_MODULES):
            return sys.modules["chromadb"]
        with _unchecked_overrides(), _httpx_without_its_cli():
            module = importlib.import_module("chromadb")
            for name in CHROMA_CLIENT_MODULES:
                importlib.import_module(name)
        return module


@contextmanager
def _unchecked_overrides() -> Iterator[None]:
    """``overrides.override`` marks methods without checking them, inside the block."""
    try:
        import overrides
    except ModuleNotFoundError:  # a chromadb that no longer uses it
        yield
        return
    real = overrides.override, overrides.overrides
    overrides.override = overrides.overrides = _marked_override
    try:
        yield
    finally:
        overrides.override, overrides.overrides = real


@contextmanager
def _httpx_without_its_cli() -> Iterator[None]:
    """httpx imports inside the block without importing its command-line client."""
    import sys

    if "httpx" in sys.modules:
        yield
        return
    placeholder = ModuleType("httpx._main")

    def main(*args: Any, **kwargs: Any) -> Any:  # httpx's CLI entry point, imported for real when called
        if sys.modules.get("httpx._main") is placeholder:
            del sys.modules["httpx._main"]
        from httpx._main import main as cli

        return cli(*args, **kwargs)

    placeholder.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = placeholder
    try:
        yield
    finally:
        if sys.modules.get("httpx._main") is placeholder:
            del sys.modules["httpx._main"]


def _marked_override(method: F | None = None, *, check_signature: bool = True,
                     check_at_runtime: bool = False) -> Any:
    """``overrides.override`` without its checks: it only marks the method as an override."""
    if method is None:
        return _marked_override
    method.__override__ = True  # type: ignore[attr-defined]
    return method
