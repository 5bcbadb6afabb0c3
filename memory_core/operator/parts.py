"""What operator code takes: the opened parts of one store, with the core's write path and reads over them.

Doctor, stats, export and import, the importers and the inspector take an :class:`OperatorParts`,
never a :class:`~memory_core.service.MemoryCore` and its attributes. It comes from the core that
opened the store (:meth:`MemoryCore.operator_parts <memory_core.service.MemoryCore.operator_parts>`),
so an operator's writes (a repair, an import) go through the same write path as the agents' on that
core: one lock, one journal, one group commit.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graph.api import GraphStore
from graph.maintenance_api import GraphMaintenance
from memory_core.embedding.api import Embedder
from memory_core.reads import Reader
from memory_core.sessions.episodes import EpisodeService
from memory_core.settings.schema import Settings
from memory_core.vectors.api import VectorStore
from memory_core.vectors.switch import IndexSwitch
from memory_core.versions.service import VersionService
from memory_core.write.path import WritePath


@dataclass(frozen=True)
class OperatorParts:
    """One open store as operator code reaches it (see the module docstring)."""

    settings: Settings
    data_dir: Path
    graph: GraphStore
    maintenance: GraphMaintenance  # what doctor and export read beyond the graph's rows
    vectors: VectorStore
    embedder: Embedder
    writer: WritePath  # the core's: its lock is the one agents' writes take
    reader: Reader
    episodes: EpisodeService
    versions: VersionService
    recovered: tuple[dict[str, Any], ...]  # what crash recovery did when the store opened
    # the core's embedder and index, switched in place by a re-embed run in its process (None: not switchable)
    switch: IndexSwitch | None = None
