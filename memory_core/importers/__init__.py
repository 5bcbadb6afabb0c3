"""Moving memory in from other tools (memory-core's own JSONL is :mod:`memory_core.operator.jsonl_import`).

``import_source(parts, "mcp-memory", "memory.json", "acme")`` reads a source with its format's
reader (one module each: :mod:`.mcp_memory`, :mod:`.basic_memory`, :mod:`.mem0`, :mod:`.markdown`)
and writes it with :func:`.source.write_source`: idempotent, crash-safe, ``dry_run`` and
``skip_bad`` as the CLI's ``memory-core import --from FORMAT PATH`` offers them. The mapping of
each format onto memory-core's model is in its module and in docs/import.md.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memory_core.errors import InvalidInputError, NotFoundError
from memory_core.importers.source import SourceReport, write_source

if TYPE_CHECKING:
    from memory_core.operator.parts import OperatorParts


@dataclass(frozen=True)
class SourceFormat:
    """A tool whose memory can be imported: its reader module, the agent its memories are written as
    when the source names none, and what PATH is."""

    name: str
    module: str
    default_agent: str
    path_is: str
    extract: bool  # run the entity extractor on the text (sources that declare no entities of their own)


FORMATS = {f.name: f for f in (
    SourceFormat("mcp-memory", "memory_core.importers.mcp_memory", "mcp-memory",
                 "the MCP memory server's memory.jsonl (or memory.json, or its read_graph JSON)", extract=False),
    SourceFormat("basic-memory", "memory_core.importers.basic_memory", "basic-memory",
                 "a basic-memory project folder (or one note)", extract=False),
    SourceFormat("mem0", "memory_core.importers.mem0", "mem0", "a mem0 export or get_all dump (JSON or JSONL)",
                 extract=True),
    SourceFormat("markdown", "memory_core.importers.markdown", "markdown",
                 "a Markdown file (CLAUDE.md, notes) or a folder of them", extract=True),
)}


def import_source(
    parts: OperatorParts, source: str, path: str | Path, tenant: str, *, agent: str | None = None,
    dry_run: bool = False, skip_bad: bool = False, progress: Callable[[int], None] | None = None,
    total: Callable[[int], None] | None = None, include_expired: bool = False, hygiene: bool = False,
) -> SourceReport:
    """Import ``path``, in the format of the tool ``source`` (one of :data:`FORMATS`), into ``tenant``.

    ``agent``: the author of memories whose source names none (default: the format's name).
    ``include_expired`` (mem0): write memories past their ``expiration_date``, ended then, instead of
    skipping them (both are counted in the report's ``expired``).
    ``hygiene``: leave out what carries no information ("ok", heartbeats, ...), counted in ``junk``.
    ``total`` is told how many memories will be written (before the first), ``progress`` how many
    more were after each batch. Returns what was written, skipped and refused (see SourceReport).
    """
    fmt = FORMATS.get(source)
    if fmt is None:
        raise InvalidInputError(f"Unknown source {source!r}; one of: {', '.join(FORMATS)}.", field="from")
    target = Path(path)
    if not target.exists():
        raise NotFoundError(f"There is no {target} to import.", path=str(target))
    if include_expired and fmt.name != "mem0":
        raise InvalidInputError("--include-expired applies to --from mem0 (the only source whose memories expire).",
                                field="include_expired")
    reader = importlib.import_module(fmt.module)
    read = reader.read(target, include_expired=True) if include_expired else reader.read(target)
    return write_source(parts, read, source=fmt.name, path=str(target), tenant=tenant,
                        agent=agent or fmt.default_agent, extract=fmt.extract, dry_run=dry_run, skip_bad=skip_bad,
                        progress=progress, total=total, hygiene=hygiene)


__all__ = ["FORMATS", "SourceFormat", "SourceReport", "import_source"]
