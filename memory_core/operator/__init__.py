"""What operators read and repair: stats, the inspector's views, doctor, export and import.

Everything here takes an :class:`OperatorParts` (``core.operator_parts()``), the opened parts of a
store with the core's write path over them, never a ``MemoryCore``'s attributes. These names are
what the boundaries (``tools/``) use; :data:`__all__` is pinned by ``tests/test_public_api.py``.
They load on first use (PEP 562): a CLI command pays only for the one it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memory_core.importers import SourceReport, import_source
    from memory_core.operator.canonical import ModelCanonical
    from memory_core.operator.consolidation import ConsolidationReport, UndoResult, consolidate, undo_merge
    from memory_core.operator.doctor.run import DoctorReport, check_stores, repair_stores
    from memory_core.operator.inspector import Inspector
    from memory_core.operator.jsonl_import import ImportCounts, import_lines
    from memory_core.operator.parts import OperatorParts
    from memory_core.operator.reembedding import ReembedReport, embedding_for, reembed
    from memory_core.operator.retention import RetentionReport, apply_retention, restore_archived
    from memory_core.operator.schedule import ConsolidationSchedule
    from memory_core.operator.stats import (
        SessionSummary,
        TenantStats,
        TenantSummary,
        disk_use,
        graph_neighbourhood,
        list_sessions,
        list_tenants,
        tenant_stats,
    )
    from memory_core.operator.transfer import export_count, export_tenant

_LAZY = {
    "OperatorParts": "memory_core.operator.parts",
    "ConsolidationReport": "memory_core.operator.consolidation",
    "UndoResult": "memory_core.operator.consolidation",
    "consolidate": "memory_core.operator.consolidation",
    "undo_merge": "memory_core.operator.consolidation",
    "ConsolidationSchedule": "memory_core.operator.schedule",
    "ModelCanonical": "memory_core.operator.canonical",
    "RetentionReport": "memory_core.operator.retention",
    "ReembedReport": "memory_core.operator.reembedding",
    "embedding_for": "memory_core.operator.reembedding",
    "reembed": "memory_core.operator.reembedding",
    "apply_retention": "memory_core.operator.retention",
    "restore_archived": "memory_core.operator.retention",
    "DoctorReport": "memory_core.operator.doctor.run",
    "check_stores": "memory_core.operator.doctor.run",
    "repair_stores": "memory_core.operator.doctor.run",
    "Inspector": "memory_core.operator.inspector",
    "SessionSummary": "memory_core.operator.stats",
    "TenantStats": "memory_core.operator.stats",
    "TenantSummary": "memory_core.operator.stats",
    "disk_use": "memory_core.operator.stats",
    "graph_neighbourhood": "memory_core.operator.stats",
    "list_sessions": "memory_core.operator.stats",
    "list_tenants": "memory_core.operator.stats",
    "tenant_stats": "memory_core.operator.stats",
    "export_count": "memory_core.operator.transfer",
    "export_tenant": "memory_core.operator.transfer",
    "ImportCounts": "memory_core.operator.jsonl_import",
    "import_lines": "memory_core.operator.jsonl_import",
    "SourceReport": "memory_core.importers",
    "import_source": "memory_core.importers",
}

__all__ = [
    "ConsolidationReport",
    "ConsolidationSchedule",
    "DoctorReport",
    "ImportCounts",
    "Inspector",
    "ModelCanonical",
    "OperatorParts",
    "ReembedReport",
    "RetentionReport",
    "SessionSummary",
    "SourceReport",
    "TenantStats",
    "TenantSummary",
    "UndoResult",
    "apply_retention",
    "check_stores",
    "consolidate",
    "disk_use",
    "embedding_for",
    "export_count",
    "export_tenant",
    "graph_neighbourhood",
    "import_lines",
    "import_source",
    "list_sessions",
    "list_tenants",
    "reembed",
    "repair_stores",
    "restore_archived",
    "tenant_stats",
    "undo_merge",
]  # = the keys of _LAZY (tests/test_public_api.py)


def __getattr__(name: str) -> Any:
    from memory_core.heavy_imports import lazy_name

    return lazy_name(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
