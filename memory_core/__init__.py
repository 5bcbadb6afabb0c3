"""memory-core: long-term memory for LLM agents (graph + vector store).

``from memory_core import MemoryCore, MemoryCoreError`` is the library API.
"""

from memory_core.config import Settings, load_settings
from memory_core.errors import MemoryCoreError
from memory_core.service import MemoryCore

__all__ = ["MemoryCore", "MemoryCoreError", "Settings", "load_settings"]
__version__ = "0.1.0"
