"""Re-embedding a store with another model in place: a new index built beside the old, then one switch.

The vector index of a store lives in Chroma collections named by a prefix (``storage.collection_prefix``,
or the one the graph records under :data:`VECTOR_PREFIX` once a re-embed switched). :func:`reembed`:

1. records the build it is doing (:data:`BUILD`: the new model's identity and a new prefix, ``<prefix>r<n>``)
   in the graph's meta, so a killed run resumes the same build;
2. per tenant, embeds with the new model every memory that is not archived and every session summary
   (episode) that the new collections do not hold yet, in batches, and upserts them there (the old
   index is untouched, so readers of the old one keep their answers); records that no longer have a row
   are removed from the new collections;
3. under the writer lock, one last pass of 2 (what was written meanwhile), then ONE graph transaction
   records the new identity (``embedder``) and prefix (:data:`VECTOR_PREFIX`) and clears the build;
4. drops the old collections (a kill here leaves them unused: the next re-embed drops them too).

A kill at any step leaves either the old index in use (steps 1-3; a rerun resumes, embedding only what the
new collections lack) or the new one (after 3). Opening the store afterwards with the old model fails
with EMBEDDER_MISMATCH, as opening it with any other model always did.

Run by a serving process over its own core (``parts.switch``, tools/serve/reembed_route.py), agents' writes go
on during step 2 (one unlocked catch-up pass precedes the locked one, so the lock is held briefly), and step 3
also switches the core to the new embedder and index in place (:mod:`memory_core.vectors.switch`); the old
index is dropped once the recalls still on it have ended.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memory_core.embedding.api import Embedder
from memory_core.errors import InvalidInputError
from memory_core.refs import EPISODE, MEMORY, episode_ref, memory_ref
from memory_core.sessions.episodes import episode_vector_metadata
from memory_core.vectors.api import VectorStore
from memory_core.write.rows import embedding_text, vector_metadata

if TYPE_CHECKING:
    from memory_core.operator.consolidation import Progress
    from memory_core.operator.parts import OperatorParts

VECTOR_PREFIX = "vector_prefix"  # graph meta: the collection prefix of the index in use (absent: the setting's)
BUILD = "reembed_build"  # graph meta: the re-embed under way, JSON {identity, prefix} ('' when none)
EMBEDDER = "embedder"  # graph meta: the identity of the model the index in use was built with
BATCH = 256
RETIRE_WAIT_S = 60.0  # how long a switch waits for recalls pinned to the old index before dropping it
Opener = Callable[[str], VectorStore]  # collection prefix -> the vector store of that prefix


@dataclass
class ReembedReport:
    """What a re-embed did: the identities and prefixes, rows embedded per tenant, records removed."""

    old_identity: str
    identity: str
    old_prefix: str
    prefix: str
    resumed: bool
    embedded: dict[str, int] = field(default_factory=dict)
    removed: int = 0
    switched: bool = False
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        total = sum(self.embedded.values())
        return {"from": self.old_identity, "to": self.identity, "old_prefix": self.old_prefix, "prefix": self.prefix,
                "resumed": self.resumed, "embedded": self.embedded, "removed": self.removed,
                "switched": self.switched, "seconds": round(self.seconds, 2),
                "rows_per_s": round(total / self.seconds, 1) if self.seconds else None}


PROVIDERS = ("minilm", "hash", "fastembed", "litellm")


def embedding_for(parts: OperatorParts, model: str, model_path: str | None = None) -> tuple[dict[str, Any], Embedder]:
    """The embedding settings ``model`` names, and their embedder: ``minilm``, ``hash[:DIMENSION]``,
    ``fastembed:<catalogue name>`` (``model_path``: a folder of its files, nothing downloaded) or
    ``litellm:<provider/model>``. INVALID_INPUT for anything else."""
    from memory_core.open import build_embedder

    provider, _, name = model.partition(":")
    if provider not in PROVIDERS or (provider in ("fastembed", "litellm") and not name) or (
            provider == "minilm" and name) or (provider == "hash" and name and not name.isdigit()):
        raise InvalidInputError(f"--model {model!r}: use minilm, hash[:DIMENSION], fastembed:<model> or "
                                "litellm:<provider/model>.", field="model")
    changes: dict[str, Any] = {"provider": provider, "model": name or None, "model_path": model_path}
    if provider == "hash" and name:
        changes["dimension"] = int(name)
        changes["model"] = None
    embedding = parts.settings.embedding.model_copy(update=changes)
    settings = parts.settings.model_copy(update={"embedding": embedding})
    shown = {k: v for k, v in embedding.model_dump().items() if k in changes and v is not None}
    return shown, build_embedder(settings)


def identity_of(embedder: Embedder) -> str:
    """How a store records the model its index was built with (``name/dimension``)."""
    return f"{embedder.name}/{embedder.dimension}"


def active_prefix(parts: OperatorParts) -> str:
    """The collection prefix of the index in use."""
    return parts.graph.meta(VECTOR_PREFIX) or parts.settings.storage.collection_prefix


def open_index(parts: OperatorParts, prefix: str) -> VectorStore:
    """The store's configured vector store (embedded Chroma or a server) under collection prefix ``prefix``."""
    from memory_core.open import build_vector_store

    return build_vector_store(parts.settings, parts.data_dir, prefix=prefix)


def reembed(parts: OperatorParts, embedder: Embedder, open_prefix: Opener | None = None, *,
            progress: Progress | None = None, stop_after: int | None = None) -> ReembedReport:
    """Build ``embedder``'s index beside the one in use, then switch to it (see the module docstring).
    ``open_prefix`` opens the store's vector index under another collection prefix (default
    :func:`open_index`). ``stop_after`` (tests) stops after that many rows embedded, without switching, as
    a kill would."""
    import time

    switch = parts.switch
    if open_prefix is None:
        def open_prefix(prefix: str) -> VectorStore:
            return open_index(parts, prefix)

    start = time.perf_counter()
    identity = identity_of(embedder)
    old_identity = parts.graph.meta(EMBEDDER) or identity_of(parts.embedder)
    old_prefix = active_prefix(parts)
    if identity == old_identity:
        raise InvalidInputError(f"The store's index is built with '{identity}' already; nothing to re-embed.",
                                field="model")
    build = _build(parts)
    resumed = build is not None and build["identity"] == identity
    if not resumed:
        build = {"identity": identity, "prefix": _next_prefix(parts, old_prefix)}
        with parts.graph.transaction() as tx:
            tx.set_meta(BUILD, json.dumps(build), overwrite=True)
    assert build is not None
    report = ReembedReport(old_identity, identity, old_prefix, build["prefix"], resumed)
    # a serving core switches to the index built here, wrapped as the store it opened (the same deadline)
    target = open_serving_index(parts, build["prefix"]) if switch is not None else open_prefix(build["prefix"])
    budget = [stop_after]
    tenants = sorted(parts.maintenance.tenants_present())
    for tenant in tenants:
        if not _fill(parts, tenant, embedder, target, report, progress, budget):
            report.seconds = time.perf_counter() - start
            if switch is not None:
                target.close()
            return report
    if switch is not None:  # what agents wrote during the build, before the writer lock stops their writes
        for tenant in sorted(parts.maintenance.tenants_present()):
            _fill(parts, tenant, embedder, target, report, None, [None])
    with parts.writer.lock:  # nothing is written meanwhile: the last pass, then the switch
        for tenant in sorted(parts.maintenance.tenants_present()):
            _fill(parts, tenant, embedder, target, report, None, [None])
        if switch is not None:  # a recall between the commit and the switch sees this process's own record
            switch.expect(identity, build["prefix"])
        with parts.graph.transaction() as tx:
            tx.set_meta(EMBEDDER, identity, overwrite=True)
            tx.set_meta(VECTOR_PREFIX, build["prefix"], overwrite=True)
            tx.set_meta(BUILD, "", overwrite=True)
        replaced = switch.switch_to(embedder, target) if switch is not None else None
        report.switched = True
    if replaced is not None and switch is not None:  # the recalls still on the old index end first
        switch.wait_unpinned(replaced, RETIRE_WAIT_S)
    _drop(open_prefix(old_prefix))
    if replaced is not None:
        replaced.vectors.close()
    report.seconds = time.perf_counter() - start
    return report


def open_serving_index(parts: OperatorParts, prefix: str) -> VectorStore:
    """The index under ``prefix`` opened as a serving core opens its own (the vector deadline over it)."""
    from memory_core.open import open_vector_store
    from memory_core.vectors.deadline import DeadlineVectorStore

    store = open_vector_store(parts.settings, parts.data_dir, rows=parts.graph.count, prefix=prefix)
    return DeadlineVectorStore(store, parts.settings.storage.vector_deadline_s, rows=parts.graph.count)


def _build(parts: OperatorParts) -> dict[str, str] | None:
    raw = parts.graph.meta(BUILD)
    return json.loads(raw) if raw else None


def _next_prefix(parts: OperatorParts, old: str) -> str:
    """``<setting>r<n>``: never ``<old>_…`` (a store lists its tenants by ``<prefix>_``), never the old one."""
    base = parts.settings.storage.collection_prefix
    n = 1
    if old.startswith(base + "r") and old[len(base) + 1:].isdigit():
        n = int(old[len(base) + 1:]) + 1
    return f"{base}r{n}"


def _fill(parts: OperatorParts, tenant: str, embedder: Embedder, target: VectorStore, report: ReembedReport,
          progress: Progress | None, budget: list[int | None]) -> bool:
    """Embed into ``target`` what it lacks of ``tenant``, remove what has no row; False when the budget ran out."""
    rows = {memory_ref(r.node.id): r for r in parts.maintenance.memory_rows(tenant) if r.node.archived_us is None}
    episodes = {episode_ref(e.id): e for e in parts.maintenance.episodes(tenant)}
    have = target.all_ids(tenant)
    extra = sorted(have - set(rows) - set(episodes))
    if extra:
        target.delete(tenant, extra)
        report.removed += len(extra)
    todo = [ref for ref in [*rows, *episodes] if ref not in have]
    for start in range(0, len(todo), BATCH):
        chunk = todo[start:start + BATCH]
        if budget[0] is not None:
            if budget[0] <= 0:
                return False
            chunk = chunk[:budget[0]]
            budget[0] -= len(chunk)
        mems = [rows[ref] for ref in chunk if ref.startswith(MEMORY + ":")]
        eps = [episodes[ref] for ref in chunk if ref.startswith(EPISODE + ":")]
        texts = [embedding_text(r) for r in mems] + [e.summary for e in eps]
        vectors = embedder.embed(texts)
        docs = [r.content for r in mems] + [e.summary for e in eps]
        metas = [vector_metadata(r.node) for r in mems] + [episode_vector_metadata(
            {"tenant": e.tenant, "session": e.session, "updated_us": e.updated_us}) for e in eps]
        target.upsert(tenant, [memory_ref(r.node.id) for r in mems] + [episode_ref(e.id) for e in eps], vectors,
                      docs, metas)
        report.embedded[tenant] = report.embedded.get(tenant, 0) + len(chunk)
        if progress is not None:
            progress(f"embedding {tenant}", min(start + len(chunk), len(todo)), len(todo))
        if budget[0] is not None and budget[0] <= 0 and start + len(chunk) < len(todo):
            return False
    return True


def _drop(store: VectorStore) -> None:
    """Drop every collection of the old index (best effort: a store that cannot drop keeps them unused)."""
    drop = getattr(store, "drop_all", None)
    if callable(drop):
        drop()
    store.close()
