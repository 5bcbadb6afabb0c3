"""Errors with stable codes.

Every error the service raises on purpose is a ``MemoryCoreError`` with a stable
``code`` that boundaries (MCP, CLI) map once, and never by message text::

    MemoryCoreError
    ├── InvalidInputError            INVALID_INPUT
    │   ├── TenantRequiredError      TENANT_REQUIRED
    │   ├── InvalidTenantError       INVALID_TENANT
    │   ├── ContentTooLargeError     CONTENT_TOO_LARGE
    │   ├── EmptyContentError        EMPTY_CONTENT
    │   ├── InvalidRefError          INVALID_REF
    │   ├── InvalidCursorError       INVALID_CURSOR
    │   ├── SecretRejectedError      SECRET_REJECTED
    │   └── PoisoningRejectedError   POISONING_REJECTED
    ├── TenantMismatchError          TENANT_MISMATCH
    ├── AgentMismatchError           AGENT_MISMATCH
    ├── ScopeDeniedError             SCOPE_DENIED
    ├── NotFoundError                NOT_FOUND
    ├── LockedError                  LOCKED
    ├── SupersededError              SUPERSEDED
    ├── ConfigError                  CONFIG_INVALID
    │   └── EmbedderMismatchError    EMBEDDER_MISMATCH
    ├── StoreError                   STORE_ERROR
    │   ├── StoreUnavailableError    STORE_UNAVAILABLE
    │   ├── StoreLockedError         STORE_LOCKED
    │   ├── StoreReadOnlyError       STORE_READ_ONLY
    │   └── StoreFullError           STORE_FULL
    └── EmbeddingError               EMBEDDING_UNAVAILABLE
"""

from __future__ import annotations

from typing import Any


class MemoryCoreError(Exception):
    """Base of every deliberate memory-core error; ``code`` is stable, ``message`` one sentence."""

    code = "MEMORY_CORE_ERROR"

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe form for boundaries: code, message and structured fields."""
        return {"code": self.code, "message": self.message, **self.fields}


class InvalidInputError(MemoryCoreError):
    code = "INVALID_INPUT"


class TenantRequiredError(InvalidInputError):
    code = "TENANT_REQUIRED"


class InvalidTenantError(InvalidInputError):
    code = "INVALID_TENANT"


class ContentTooLargeError(InvalidInputError):
    code = "CONTENT_TOO_LARGE"


class EmptyContentError(InvalidInputError):
    code = "EMPTY_CONTENT"


class InvalidRefError(InvalidInputError):
    code = "INVALID_REF"


class InvalidCursorError(InvalidInputError):
    code = "INVALID_CURSOR"


class SecretRejectedError(InvalidInputError):
    """The write holds secrets and ``security.secrets`` is ``reject``, or a name that addresses rows
    (session, agent, channel, …) holds one under ``redact`` too: nothing was written.

    ``fields``: ``kinds`` (kind -> count) and ``secrets`` (``{field, kind, start, end}`` each) —
    where the secrets are, never what they are; for a name, ``field`` names it.
    """

    code = "SECRET_REJECTED"


class PoisoningRejectedError(InvalidInputError):
    """The content addresses a model (an instruction override, role or tool-call markup, hidden characters,
    a link carrying data out) and the tenant's ``security.poisoning`` is ``reject``: nothing was written.

    ``fields``: ``flags``, what the scan found (:data:`memory_core.write.poisoning.FLAGS`); in a batch also
    the ``index`` of the refused memory.
    """

    code = "POISONING_REJECTED"


class TenantMismatchError(MemoryCoreError):
    code = "TENANT_MISMATCH"


class AgentMismatchError(MemoryCoreError):
    """A connection bound to an agent named another one as author or viewer."""

    code = "AGENT_MISMATCH"


class ScopeDeniedError(MemoryCoreError):
    """The call is outside what the connection's scope allows (a read scope writing, a write scope
    changing another agent's row); nothing was changed."""

    code = "SCOPE_DENIED"


class NotFoundError(MemoryCoreError):
    code = "NOT_FOUND"


class LockedError(MemoryCoreError):
    """The memory is locked (lock_memory): no update or delete until it is unlocked."""

    code = "LOCKED"


class SupersededError(MemoryCoreError):
    """The memory was corrected by a newer version; update the head (its ref is in ``head``)."""

    code = "SUPERSEDED"


class ConfigError(MemoryCoreError):
    code = "CONFIG_INVALID"


class EmbedderMismatchError(ConfigError):
    """The data directory's vectors come from another embedding model than the configured one."""

    code = "EMBEDDER_MISMATCH"


class StoreError(MemoryCoreError):
    code = "STORE_ERROR"


class StoreUnavailableError(StoreError):
    code = "STORE_UNAVAILABLE"


class StoreLockedError(StoreError):
    code = "STORE_LOCKED"


class StoreReadOnlyError(StoreError):
    code = "STORE_READ_ONLY"


class StoreFullError(StoreError):
    """The disk (or quota) holding the data directory is full; frees up when space returns."""

    code = "STORE_FULL"


class EmbeddingError(MemoryCoreError):
    code = "EMBEDDING_UNAVAILABLE"
