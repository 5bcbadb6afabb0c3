"""Importing the heavy packages (onnxruntime, tokenizers, chromadb) off the main thread, safely and cheaply.

A server warms the embedding model and Chroma on background threads while other threads serve.
Two threads importing numpy-based packages at once can meet a module half-initialised (Python's
per-module import locks break the cycle numpy's own imports form by handing one thread the partial
module: ``ImportError: cannot import name ... from partially initialized module``). So:

- numpy is imported in full by whoever starts the warm-up threads, before they start;
- each heavy package is imported under :data:`IMPORT_LOCK`, one importer at a time; the work that
  follows (building the ONNX session, opening Chroma's Rust core) runs outside it, side by side.

chromadb is imported the same way, by :mod:`memory_core.vectors.chroma_import` (the vector package
owns everything Chroma).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from importlib import import_module
from types import ModuleType
from typing import Any

IMPORT_LOCK = threading.RLock()  # held while a heavy package imports (re-entrant: imports nest)


@contextmanager
def importing() -> Iterator[None]:
    """Hold the import lock: no other warm-up step imports a heavy package meanwhile."""
    with IMPORT_LOCK:
        yield


def onnx_runtime() -> tuple[ModuleType, Any]:
    """``onnxruntime`` and the ``tokenizers.Tokenizer`` class, imported under the import lock."""
    with importing():
        import onnxruntime
        from tokenizers import Tokenizer

    return onnxruntime, Tokenizer


def lazy_name(package: str, table: Mapping[str, str | tuple[str, str]], name: str) -> Any:
    """A public package's name loaded on first use (its PEP 562 ``__getattr__``), under the import lock so a
    warm-up importing onnxruntime meanwhile never hands out numpy half-initialised. ``table`` maps a name
    to its module, or to (its module, the name it has there); the value is cached in the package."""
    where = table.get(name)
    if where is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    module, attribute = (where, name) if isinstance(where, str) else where
    with importing():
        value = getattr(import_module(module), attribute)
    setattr(sys.modules[package], name, value)
    return value
