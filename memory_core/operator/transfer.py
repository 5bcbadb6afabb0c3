"""Export and import of one tenant as JSONL: one memory per line, everything needed to rebuild it.

An export reads one tenant only (the tenant is validated first; every row comes from
the tenant-scoped graph reads), oldest first, private memories included: it is an
operator's backup, not an agent's view. Each line is an :class:`ExportLine`
(:mod:`memory_core.operator.export_format`).

:func:`import_lines` (:mod:`memory_core.operator.jsonl_import`) writes such a file into one named
tenant: idempotent, crash-safe, touching only the rows it writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from memory_core import validation as v
from memory_core.entities.transfer import EntityExporter
from memory_core.errors import StoreError
from memory_core.operator.export_format import ExportEdge, ExportLine
from memory_core.reads import row_from_attrs
from memory_core.refs import MAX_ID, memory_ref
from memory_core.store_errors import graph_errors
from memory_core.write.rows import public_idempotency_key

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts

EXPORT_CHUNK = 200


def export_count(parts: OperatorParts, tenant: str) -> int:
    """How many memories an export of ``tenant`` will hold (for progress bars)."""
    return parts.graph.count(v.tenant(tenant))


def export_tenant(parts: OperatorParts, tenant: str) -> Iterator[dict[str, Any]]:
    """Yield the tenant's memories as JSON-able :class:`ExportLine` dicts, oldest first."""
    tenant = v.tenant(tenant)
    keys = list(parts.graph.iter_newest(tenant, None))
    keys.reverse()
    with graph_errors("exporting a tenant"):
        entities = EntityExporter.of(parts.graph, tenant)
    for start in range(0, len(keys), EXPORT_CHUNK):
        chunk = [mem_id for _ts, mem_id in keys[start : start + EXPORT_CHUNK]]
        with graph_errors("exporting a tenant"):
            lines = _export_chunk(parts, tenant, chunk, entities)
        yield from lines


def _export_chunk(parts: OperatorParts, tenant: str, ids: list[int], entities: EntityExporter) -> list[dict[str, Any]]:
    graph = parts.graph
    found = graph.memories(tenant, ids)
    about = entities.fields(graph, tenant, ids, found)
    attrs = {i: found[i] for i in ids if i in found}
    contents = graph.contents(tenant, attrs)
    keys = parts.maintenance.idempotency_keys(tenant, attrs)
    out = []
    for mem_id, a in attrs.items():
        if mem_id not in contents:
            continue
        if mem_id > MAX_ID:  # left by an import before ids were bounded: no line can name it
            raise StoreError(f"{memory_ref(mem_id)} has an id past the largest a ref can name ({MAX_ID}), so an "
                             "export cannot write it; `memory-core doctor` lists such rows.", ref=memory_ref(mem_id))
        row = row_from_attrs(a, contents[mem_id]).to_dict()
        row.pop("review_due", None)  # derived from review_after and the clock
        edges = [ExportEdge(kind=e.kind, node=e.other) for e in graph.edges_of(tenant, memory_ref(mem_id))
                 if e.direction == "out"]
        key = public_idempotency_key(keys.get(mem_id))
        line = ExportLine(**row, idempotency_key=key, content_hash=a.content_hash, edges=edges,
                          **about.get(mem_id, {}))
        out.append(line.model_dump(mode="json", by_alias=True))
    return out


__all__ = ["export_count", "export_tenant"]
