"""The background worker that asks the model provider for a memory's entities, off the write path.

An add hands its written memories to :meth:`EntityWorker.submit` after it returned: a bounded
queue, never waited on (when it is full the memory is skipped and counted, the add is not
slowed). One daemon thread takes a memory at a time, asks the model (fail-soft: a provider
failure is logged by its stable reason and counted, nothing else happens), passes what it named
through the secrets guard (:func:`without_secrets`) and links the rest in one graph transaction
under the writer lock, like any write; a memory deleted meanwhile links nothing. :meth:`close`
stops the thread (a call in flight is bounded by the provider's ``total_timeout_s``); what is still
queued is dropped: these entities are a bonus, the deterministic extractor already linked the
obvious ones.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from graph.api import EntitySpec, GraphStoreError, MemoryRecord, StoreLifecycle, entity_norm
from memory_core.entities.model import EntityModel, LiteLLMEntityModel, ModelEntities
from memory_core.errors import MemoryCoreError
from memory_core.provider.errors import ProviderError, provider_error_reason
from memory_core.secret_guard import SecretGuard, detect
from memory_core.settings.schema import ModelProviderSettings

if TYPE_CHECKING:
    from memory_core.write.path import WritePath

log = logging.getLogger(__name__)
QUEUE_SIZE = 1000


@dataclass
class WorkerStats:
    linked: int = 0  # memories the model named entities for
    failed: int = 0  # provider failures (fail-soft)
    dropped: int = 0  # memories skipped because the queue was full


@dataclass(frozen=True, slots=True)
class _Job:
    tenant: str
    mem_id: int
    content: str


class EntityWorker:
    def __init__(self, graph: StoreLifecycle, model: EntityModel, write_lock: AbstractContextManager[object],
                 *, queue_size: int = QUEUE_SIZE, guard: SecretGuard | None = None) -> None:
        self.graph = graph
        self.model = model
        self.guard = guard or SecretGuard()
        self.lock = write_lock
        self.stats = WorkerStats()
        self._jobs: queue.Queue[_Job | None] = queue.Queue(maxsize=queue_size)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="entity-model", daemon=True)
        self._thread.start()

    def submit(self, tenant: str, mem_id: int, content: str) -> None:
        """Queue a written memory; never blocks (a full queue drops it)."""
        if self._closed:
            return
        try:
            self._jobs.put_nowait(_Job(tenant, mem_id, content))
        except queue.Full:
            self.stats.dropped += 1

    def drain(self, timeout_s: float) -> bool:
        """Wait until every queued memory was handled (tests, operators); False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._jobs.unfinished_tasks == 0:
                return True
            time.sleep(0.01)
        return self._jobs.unfinished_tasks == 0

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        while True:  # what is queued is dropped: a bonus, not a promise
            try:
                self._jobs.get_nowait()
                self._jobs.task_done()
            except queue.Empty:
                break
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            job = self._jobs.get()
            try:
                if job is None:
                    return
                self._handle(job)
            finally:
                self._jobs.task_done()

    def _handle(self, job: _Job) -> None:
        try:
            found = self.model.extract(job.content)
        except ProviderError as exc:
            self.stats.failed += 1
            log.info("model entities skipped for mem:%d: %s", job.mem_id, exc.reason)
            return
        except Exception as exc:  # the worker's top-level handler: a plug-in model may raise anything
            self.stats.failed += 1
            log.warning("model entities skipped for mem:%d: %s", job.mem_id, provider_error_reason(exc))
            return
        found = without_secrets(found, self.guard)
        if not (found.entities or found.relations) or self._closed:
            return
        try:
            with self.lock, self.graph.transaction() as tx:
                tx.link_entities(job.tenant, job.mem_id, found.entities, found.relations, time.time_ns() // 1000)
            self.stats.linked += 1
        except (GraphStoreError, MemoryCoreError) as exc:  # a failing store: the add already succeeded
            self.stats.failed += 1
            log.warning("model entities not written for mem:%d: %s", job.mem_id, type(exc).__name__)


def without_secrets(found: ModelEntities, guard: SecretGuard) -> ModelEntities:
    """What the model named, less what a secret is: entities named after one, aliases and kinds that are
    one, relations labelled with one or ending at a dropped entity. Dropped, never redacted or refused:
    the server writes these itself (under ``allow``, all of it is kept)."""
    if not guard.active:
        return found
    entities = [EntitySpec(e.name, None if e.kind and detect(e.kind) else e.kind,
                           tuple(a for a in e.aliases if not detect(a)))
                for e in found.entities if not detect(e.name)]
    kept = {entity_norm(n) for e in entities for n in (e.name, *e.aliases)}
    relations = [r for r in found.relations
                 if entity_norm(r.src) in kept and entity_norm(r.dst) in kept and not detect(r.label)]
    return ModelEntities(entities, relations)


def build_entity_worker(settings: ModelProviderSettings, graph: StoreLifecycle, writer: WritePath,
                        model: EntityModel | None = None) -> EntityWorker | None:
    """The worker, fed by every add, when ``model_provider.enabled`` and ``extract_entities`` ask for it."""
    if not (settings.enabled and settings.extract_entities):
        return None
    worker = EntityWorker(graph, model or LiteLLMEntityModel(settings), writer.lock, guard=writer.guard)

    def feed(rows: Sequence[MemoryRecord]) -> None:
        for row in rows:
            worker.submit(row.node.tenant, row.node.id, row.content)

    writer.on_written = feed
    return worker
