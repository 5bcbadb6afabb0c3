"""The graph store's errors: what any backend raises, decided by kind (never by message text).

    GraphStoreError(kind)        a failure of the durable store: full, read_only, busy, unavailable,
    ├── SchemaVersionError       corrupt, io, schema, conflict (from SQLite result codes or SQLSTATEs)
    GraphConfigError(key)        the store cannot be opened as configured (a missing DSN, an extra not installed)

``memory_core`` maps them once, to its coded STORE_* and CONFIG errors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ErrorKind = Literal["full", "read_only", "busy", "unavailable", "corrupt", "io", "schema", "conflict"]


@dataclass
class GraphStoreError(Exception):
    """A failure of the durable graph store, by kind (never by message text)."""

    kind: ErrorKind
    detail: str
    cause: BaseException | None = field(default=None, repr=False)
    fields: dict[str, str] = field(default_factory=dict)  # the backend's own code, e.g. {"sqlite_error": ...}

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class SchemaVersionError(GraphStoreError):
    """The store was written by a newer memory-core (its schema version is higher than this code's)."""

    def __init__(self, found: int, supported: int) -> None:
        super().__init__("schema", f"schema version {found} is newer than this memory-core's {supported}")
        self.found = found


@dataclass
class GraphConfigError(Exception):
    """The graph store cannot be opened as configured: ``key`` names the setting at fault."""

    key: str
    message: str

    def __str__(self) -> str:
        return self.message
