"""memory-core: long-term memory for LLM agents (graph + vector store).

The library API, and all the boundaries (``tools/``) import of the core besides
:mod:`memory_core.operator` (a test holds them to it): ``from memory_core import MemoryCore,
MemoryCoreError``. :data:`__all__` is pinned by ``tests/test_public_api.py``.

The names load on first use (PEP 562), so ``import memory_core`` stays cheap: the CLI's ``--help``
and the MCP bridge never pay for networkx, pydantic or numpy. A name loads under the lock the
heavy packages import under (:mod:`memory_core.heavy_imports`), so a thread that asks for
``MemoryCore`` while a warm-up imports onnxruntime never meets numpy half-initialised.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graph.api import EntityNode
    from memory_core.dir_lock import DirLock
    from memory_core.dir_lock import claim as claim_data_dir
    from memory_core.embedding.api import Embedder
    from memory_core.embedding.local import HashEmbedder, shared_minilm
    from memory_core.entities.related import MAX_DEPTH as RELATED_MAX_DEPTH
    from memory_core.entities.related import RelatedItem, RelatedResult, entity_dict
    from memory_core.entities.service import MergedEntity
    from memory_core.errors import (
        AgentMismatchError,
        ConfigError,
        ContentTooLargeError,
        EmbedderMismatchError,
        EmbeddingError,
        EmptyContentError,
        InvalidCursorError,
        InvalidInputError,
        InvalidRefError,
        InvalidTenantError,
        LockedError,
        MemoryCoreError,
        NotFoundError,
        PoisoningRejectedError,
        ScopeDeniedError,
        SecretRejectedError,
        StoreError,
        StoreFullError,
        StoreLockedError,
        StoreReadOnlyError,
        StoreUnavailableError,
        SupersededError,
        TenantMismatchError,
        TenantRequiredError,
    )
    from memory_core.models import (
        DEFAULT_SALIENCE,
        MEMORY_TYPES,
        AddResult,
        CheckResult,
        Contents,
        MemoryRow,
        RecallResult,
        RecentTurnsPage,
    )
    from memory_core.recall.request import RecallOptions
    from memory_core.recall.stages import describe as describe_stages
    from memory_core.scopes import DEFAULT_SCOPE, SCOPE_NAMES, Scope, parse_scope
    from memory_core.service import MemoryCore
    from memory_core.sessions.episodes import Episode, Recovery
    from memory_core.settings import load_settings, template_text
    from memory_core.settings.schema import Settings, TokenBinding
    from memory_core.validation import NAME_PATTERN, TENANT_PATTERN
    from memory_core.validation import name as validate_name
    from memory_core.validation import tenant as validate_tenant
    from memory_core.versions.service import UpdateResult
    from memory_core.warm_up import warm_up_in_background
    from memory_core.write.request import AddFields, AddItem, MemoryFields

__version__ = "0.1.0"

_ERRORS = ("AgentMismatchError", "ConfigError", "ContentTooLargeError", "EmbedderMismatchError", "EmbeddingError",
           "EmptyContentError", "InvalidCursorError", "InvalidInputError", "InvalidRefError", "InvalidTenantError",
           "LockedError", "MemoryCoreError", "NotFoundError", "PoisoningRejectedError", "ScopeDeniedError",
           "SecretRejectedError", "StoreError", "StoreFullError", "StoreLockedError", "StoreReadOnlyError",
           "StoreUnavailableError", "SupersededError",
           "TenantMismatchError", "TenantRequiredError")

# name -> its module, or (module, the name it has there) where that name would not say what it is here
_LAZY: dict[str, str | tuple[str, str]] = {
    "MemoryCore": "memory_core.service",
    "Settings": "memory_core.settings.schema",
    "TokenBinding": "memory_core.settings.schema",
    "load_settings": "memory_core.settings",
    "template_text": "memory_core.settings",
    # what the service's methods return and take
    "AddResult": "memory_core.models",
    "CheckResult": "memory_core.models",
    "Contents": "memory_core.models",
    "MemoryRow": "memory_core.models",
    "RecallResult": "memory_core.models",
    "RecentTurnsPage": "memory_core.models",
    "DEFAULT_SALIENCE": "memory_core.models",
    "MEMORY_TYPES": "memory_core.models",
    "Episode": "memory_core.sessions.episodes",
    "Recovery": "memory_core.sessions.episodes",
    "UpdateResult": "memory_core.versions.service",
    "MergedEntity": "memory_core.entities.service",
    "EntityNode": "graph.api",
    "RelatedItem": "memory_core.entities.related",
    "RelatedResult": "memory_core.entities.related",
    "RELATED_MAX_DEPTH": ("memory_core.entities.related", "MAX_DEPTH"),
    "entity_dict": "memory_core.entities.related",
    "RecallOptions": "memory_core.recall.request",
    "AddFields": "memory_core.write.request",
    "AddItem": "memory_core.write.request",
    "MemoryFields": "memory_core.write.request",
    "describe_stages": ("memory_core.recall.stages", "describe"),
    # who may act: scopes and the names a boundary checks before it opens anything
    "Scope": "memory_core.scopes",
    "DEFAULT_SCOPE": "memory_core.scopes",
    "SCOPE_NAMES": "memory_core.scopes",
    "parse_scope": "memory_core.scopes",
    "NAME_PATTERN": "memory_core.validation",
    "TENANT_PATTERN": "memory_core.validation",
    "validate_name": ("memory_core.validation", "name"),
    "validate_tenant": ("memory_core.validation", "tenant"),
    # embedders, and what a serving process does before it opens a store
    "Embedder": "memory_core.embedding.api",
    "HashEmbedder": "memory_core.embedding.local",
    "shared_minilm": "memory_core.embedding.local",
    "DirLock": "memory_core.dir_lock",
    "claim_data_dir": ("memory_core.dir_lock", "claim"),
    "warm_up_in_background": "memory_core.warm_up",
    **dict.fromkeys(_ERRORS, "memory_core.errors"),
}

__all__ = [
    "DEFAULT_SALIENCE",
    "DEFAULT_SCOPE",
    "MEMORY_TYPES",
    "NAME_PATTERN",
    "RELATED_MAX_DEPTH",
    "SCOPE_NAMES",
    "TENANT_PATTERN",
    "AddFields",
    "AddItem",
    "AddResult",
    "AgentMismatchError",
    "CheckResult",
    "ConfigError",
    "ContentTooLargeError",
    "Contents",
    "DirLock",
    "Embedder",
    "EmbedderMismatchError",
    "EmbeddingError",
    "EmptyContentError",
    "EntityNode",
    "Episode",
    "HashEmbedder",
    "InvalidCursorError",
    "InvalidInputError",
    "InvalidRefError",
    "InvalidTenantError",
    "LockedError",
    "MemoryCore",
    "MemoryCoreError",
    "MemoryFields",
    "MemoryRow",
    "MergedEntity",
    "NotFoundError",
    "PoisoningRejectedError",
    "RecallOptions",
    "RecallResult",
    "RecentTurnsPage",
    "Recovery",
    "RelatedItem",
    "RelatedResult",
    "Scope",
    "ScopeDeniedError",
    "SecretRejectedError",
    "Settings",
    "StoreError",
    "StoreFullError",
    "StoreLockedError",
    "StoreReadOnlyError",
    "StoreUnavailableError",
    "SupersededError",
    "TenantMismatchError",
    "TenantRequiredError",
    "TokenBinding",
    "UpdateResult",
    "claim_data_dir",
    "describe_stages",
    "entity_dict",
    "load_settings",
    "parse_scope",
    "shared_minilm",
    "template_text",
    "validate_name",
    "validate_tenant",
    "warm_up_in_background",
]  # = the keys of _LAZY (tests/test_public_api.py)


def __getattr__(name: str) -> Any:
    from memory_core.heavy_imports import lazy_name

    return lazy_name(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
