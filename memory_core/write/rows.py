"""The pieces of a memory row the write path derives: its content hash, the text it embeds, its
Chroma metadata and its idempotency key's namespace (also used by doctor, import and export)."""

from __future__ import annotations

import hashlib

from graph.api import MemoryNode, MemoryRecord
from memory_core.vectors.api import Metadata


def content_hash(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).casefold().encode("utf-8")).hexdigest()[:32]


def embedding_text(row: MemoryRecord) -> str:
    """The text embedded for a memory: its content (one place to change it)."""
    return row.content


def vector_metadata(node: MemoryNode) -> Metadata:
    """Filterable metadata for Chroma: no None values, project '' means the global pool."""
    meta: Metadata = {
        "tenant": node.tenant,
        "session": node.session,
        "agent": node.agent,
        "type": node.type,
        "visibility": node.visibility,
        "ts_us": node.ts_us,
        "salience": node.salience,
        "project_id": node.project_id or "",
        "kind": "memory",
    }
    if node.role:
        meta["role"] = node.role
    if node.channel:
        meta["channel"] = node.channel
    if node.source_id:
        meta["source_id"] = node.source_id
    return meta


# Private rows keep their idempotency keys in their author's namespace: ``<agent>\x1f<key>``
# (neither agent ids nor keys may hold \x1f). Shared rows keep the key as given.
_KEY_SCOPE_SEP = "\x1f"


def scoped_idempotency_key(key: str | None, visibility: str, agent: str) -> str | None:
    """The key as stored: shared writes share the tenant's namespace; a private write's key is
    its author's own, so no other agent's retry can hit (and so learn of) a private row, and a
    colliding key of another agent's private row never stops a write."""
    if key is None or visibility != "agent":
        return key
    return f"{agent}{_KEY_SCOPE_SEP}{key}"


def public_idempotency_key(stored: str | None) -> str | None:
    """The key as the caller gave it (exports)."""
    return None if stored is None else stored.rsplit(_KEY_SCOPE_SEP, 1)[-1]
