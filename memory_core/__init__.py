"""memory-core: long-term memory for LLM agents (graph + vector store).

``from memory_core import MemoryCore, MemoryCoreError`` is the library API. The names load
on first use (PEP 562), so ``import memory_core`` (and ``memory_core.errors``) stays cheap:
the CLI's ``--help`` and the MCP bridge never pay for networkx, pydantic or numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_core.errors import MemoryCoreError
    from memory_core.service import MemoryCore
    from memory_core.settings import load_settings
    from memory_core.settings.schema import Settings

__all__ = ["MemoryCore", "MemoryCoreError", "Settings", "load_settings"]
__version__ = "0.1.0"

_LAZY = {
    "MemoryCore": "memory_core.service",
    "MemoryCoreError": "memory_core.errors",
    "Settings": "memory_core.settings.schema",
    "load_settings": "memory_core.settings",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memory_core' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
