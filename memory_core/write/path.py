"""The write path: validated adds and deletes that keep Chroma and the graph in agreement.

An add runs in three steps under the writer lock:

1. journal the intent (``add mem:<id>``) in SQLite and commit;
2. upsert the vector record in Chroma;
3. in one graph-store transaction write the graph node, its edges and FTS row, and clear
   the journal entry (the store's caches follow the commit).

:meth:`WritePath.staged` is that sequence, once: memories and episodes both write through it.

A failure in 2 or 3 removes the vector record and the journal entry before raising. A
crash anywhere leaves at most a journal entry and a Chroma record that no graph node
references; :meth:`WritePath.recover` (run at open) deletes both. So an add that returned
is in both stores, and an add that did not is, after recovery, in neither.
Deletes journal first too, then drop the graph row, then the vector record.

A doctor restore (a memory rebuilt from an orphan Chroma record, under the record's own
ref) is journaled as ``restore``, never as ``add``: the record existed before the repair,
so neither a failure nor recovery ever deletes it. An interrupted restore leaves the record
an orphan, and the next repair restores it again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from graph.api import MEMORY_STATE_FIELDS, GraphStore, GraphStoreError, GraphTxn, MemoryNode, MemoryRecord, mem_node
from memory_core.embedding.api import Embedder
from memory_core.errors import (
    InvalidInputError,
    MemoryCoreError,
    PoisoningRejectedError,
    SecretRejectedError,
    StoreError,
    StoreUnavailableError,
    SupersededError,
)
from memory_core.models import AddResult, from_us
from memory_core.observe import TimedRLock
from memory_core.observe.tally import Outcomes
from memory_core.refs import MAX_KEPT_ID, memory_ref
from memory_core.secret_guard import SecretGuard
from memory_core.settings.schema import HygieneSettings, LimitSettings, WriteSettings
from memory_core.store_errors import graph_error
from memory_core.vectors.api import VectorStore
from memory_core.vectors.deadline import vector_store_wedged
from memory_core.vectors.switch import stamp, still_current
from memory_core.write.add_rows import REDACT, ItemRef, PoisoningPolicyOf, PreparedAdd, flag_all, prepare_add
from memory_core.write.group_commit import GroupCommit
from memory_core.write.hygiene import REPEAT, junk_reason, repeat_of
from memory_core.write.request import AddItem
from memory_core.write.rows import embedding_text, vector_metadata

CLEANUP_INTERVAL_S = 2.0
CONFLICT_RETRIES = 2  # an idempotency key another replica committed first: the add is answered again
JournalEntries = list[tuple[str, str, str]]  # (op, tenant, ref)
STORED, RETRY = "stored", "retry"  # outcomes of a row beside hygiene's reasons (memory_core.write.hygiene.REASONS)
Linked = Callable[[GraphTxn, list[tuple[int, int]]], None]  # (txn, [(item index, id written)]), see add_many


class WritePath:
    """Adds and deletes for :class:`memory_core.service.MemoryCore`."""

    def __init__(self, graph: GraphStore, vectors: VectorStore, embedder: Embedder, limits: LimitSettings,
                 guard: SecretGuard = REDACT, write: WriteSettings | None = None,
                 hygiene: HygieneSettings | None = None, poisoning_of: PoisoningPolicyOf = flag_all) -> None:
        self.graph = graph
        self.vectors = vectors
        self.embedder = embedder
        self.limits = limits
        self.guard = guard  # the secrets policy every prepared row passes (see memory_core.secret_guard)
        self.poisoning_of = poisoning_of  # a tenant's poisoning policy (see memory_core.write.poisoning)
        self.hygiene = hygiene or HygieneSettings(enabled=False)  # what screened adds skip (memory_core.write.hygiene)
        self.lock = TimedRLock()  # its waits and long holders are observed (memory_core.observe)
        self.on_written: Callable[[list[MemoryRecord]], None] | None = None  # after an add returned
        self._next_cleanup = 0.0  # time.monotonic() before which no journal cleanup is retried
        self.outcomes = Outcomes()  # rows by what became of them (read by /metrics)
        self.flagged = Outcomes()  # stored rows by poisoning flag (read by /metrics)
        self._generation = 0  # row writes this path attempted: a repeat check is redone when it moved
        write = write or WriteSettings()
        # concurrent single adds share batches (None: each is written alone, as add_many([item]))
        self.batches = None if write.batch_max < 2 else GroupCommit(
            self.write_prepared, batch_max=write.batch_max, window_s=write.coalesce_ms / 1000)

    # ---- validation ------------------------------------------------------------------------
    def prepare(self, item: AddItem, *, extract: bool = True) -> PreparedAdd:
        """Validate one add's arguments into a storable row (see :func:`prepare_add`)."""
        return prepare_add(item, self.limits, extract=extract, guard=self.guard, poisoning_of=self.poisoning_of)

    # ---- adds ------------------------------------------------------------------------------
    def add_one(self, item: AddItem) -> AddResult:
        """One caller's add: validated in its own thread, then written in a batch with the adds of
        other callers in flight (:mod:`memory_core.write.group_commit`), or alone when batching is off."""
        if self.batches is None:
            return self.add_many([item], screen=True)[0]
        return self.batches.add(lambda: self._screened(self.prepare(item)))

    @staticmethod
    def _screened(p: PreparedAdd) -> PreparedAdd:
        p.screen = True
        return p

    def add_many(
        self,
        items: Sequence[AddItem],
        *,
        preferred_ids: Sequence[int | None] = (),
        edges: Sequence[Sequence[tuple[str | ItemRef, str]]] = (),
        restore: bool = False,
        supersedes: Sequence[int | None] = (),
        states: Sequence[Mapping[str, Any] | None] = (),
        linked: Linked | None = None,
        extract: bool = True,
        screen: bool = False,
    ) -> list[AddResult]:
        """Validate all, embed outside the lock, then write all-or-nothing.

        ``screen`` (agents' adds; imports only when asked): write-time hygiene answers a row that carries no
        information ``stored: false`` with its reason instead of writing it (:mod:`memory_core.write.hygiene`).

        ``preferred_ids`` (imports): keep a row's original id when nothing uses it and it is at
        most :data:`MAX_KEPT_ID` (a larger one gets a fresh id: no file moves the shared sequence
        towards the end of the range refs can name).
        ``restore`` (doctor): the vector records under the preferred ids exist already; a row
        that keeps its id is journaled as a restore, so no failure or recovery deletes them.
        ``supersedes`` (update_memory): the row is a new version of that memory; the graph
        transaction that writes it also ends the old one's validity (SupersededError, nothing
        written, when the old one is no longer a current, unlocked version).
        ``states`` (imports): the row is written with this version state (any of ``supersedes_id``,
        ``valid_to_us``, ``locked``) in its own transaction; no other row is touched. An edge target
        or a ``supersedes_id`` may be an :class:`ItemRef` to another item of the call.
        ``linked`` (imports): called inside the graph transaction that writes the rows, after them,
        with ``[(item index, id)]`` of the rows written; whatever it writes commits with them (or
        not at all). It may run more than once (a retried transaction): it must derive everything
        from its arguments.
        ``extract`` False (imports carry their entities): only declared entities are linked.
        """
        if len(items) > self.limits.max_batch:
            raise InvalidInputError(f"A batch holds at most {self.limits.max_batch} memories.")
        prepared = []
        for index, item in enumerate(items):
            try:
                p = self.prepare(item, extract=extract)
            except (SecretRejectedError, PoisoningRejectedError) as exc:
                if len(items) > 1:  # which memory of the batch (nothing of it is written)
                    exc.fields["index"] = index
                raise
            p.position = index
            p.screen = screen
            prepared.append(p)
        for p, pid in zip(prepared, preferred_ids, strict=False):
            p.preferred_id = pid
            p.restore = restore and pid is not None
        for p, state in zip(prepared, states, strict=False):
            _set_version_state(p, state)
        for p, extra in zip(prepared, edges, strict=False):
            p.links = list(extra)
        for p, old in zip(prepared, supersedes, strict=False):
            p.supersedes = old
            p.row = replace(p.row, node=replace(p.row.node, supersedes_id=old))
        return self.write_prepared(prepared, linked=linked, extract=extract)

    def write_prepared(self, prepared: list[PreparedAdd], *, linked: Linked | None = None,
                       extract: bool = True) -> list[AddResult]:
        """Embed validated rows in one call (outside the lock), then write them all-or-nothing (each row's
        ``position`` is its index among the rows written: group commit's batches are prepared one caller at a
        time). Screened rows write-time hygiene skips are answered ``stored: false`` and neither embedded nor
        written; only agents' adds are screened, never imports (whose ``linked`` and item refs count positions)."""
        generation = self._generation
        skipped, repeats = self._skipped(prepared)
        kept = [i for i in range(len(prepared)) if i not in skipped]
        taken = stamp(self.embedder)
        vectors = self.embedder.embed([embedding_text(prepared[i].row) for i in kept]) if kept else []
        written: list[AddResult] = []
        if kept:
            with self.lock:
                if not still_current(self.embedder, taken):  # a re-embed switched models meanwhile
                    vectors = self.embedder.embed([embedding_text(prepared[i].row) for i in kept])
                if self._generation != generation:  # rows were written since the repeats were looked for
                    late = self._late_repeats(prepared, kept)
                    skipped.update(late)
                    vectors = [vec for i, vec in zip(kept, vectors, strict=True) if i not in late]
                    kept = [i for i in kept if i not in late]
                for position, i in enumerate(kept):
                    prepared[i].position = position
                written = self._write([prepared[i] for i in kept], vectors, linked) if kept else []
        answers = iter(written)
        results = [skipped[i] if i in skipped else next(answers) for i in range(len(prepared))]
        for i, first in repeats.items():  # answered with the ref of the row of the call it repeats
            results[i] = replace(results[i], ref=results[first].ref)
        results = [replace(r, redacted=p.redacted) if p.redacted else r
                   for p, r in zip(prepared, results, strict=True)]
        if extract and self.on_written is not None:
            self.on_written([p.row for p, r in zip(prepared, results, strict=True) if r.created])
        self._count(prepared, results)
        return results

    def _count(self, prepared: list[PreparedAdd], results: list[AddResult]) -> None:
        """What the rows became (``outcomes``: ``stored``, ``retry`` for an idempotent add answered with its first
        row, or the reason hygiene did not store it) and the poisoning flags of the rows stored (``flagged``)."""
        self.outcomes.count([STORED if r.created else (r.reason or RETRY) for r in results])
        self.flagged.count([flag for p, r in zip(prepared, results, strict=True) if r.created
                            for flag in p.row.node.flags])

    def _skipped(self, prepared: list[PreparedAdd]) -> tuple[dict[int, AddResult], dict[int, int]]:
        """The screened rows write-time hygiene does not store, by index, each answered ``stored: false``: junk
        by its text alone, then an agent's exact repeat of its own recent row or of a row earlier in the call
        (the second map: repeat's index -> the index of the row it repeats)."""
        skipped: dict[int, AddResult] = {}
        repeats: dict[int, int] = {}
        window_us = int(self.hygiene.repeat_window_s * 1_000_000)
        earlier: list[MemoryNode] = []
        for i, p in enumerate(prepared):
            node = p.row.node
            if not p.screen or not self.hygiene.on_for(node.tenant):
                continue
            if p.idempotency_key is not None and self._by_idempotency_key(node.tenant, p.idempotency_key):
                continue  # a retry: answered with the first add's ref by the write, whatever its words
            ts = from_us(node.ts_us)
            reason = junk_reason(p.row.content)
            if reason is not None:
                skipped[i] = AddResult(None, ts, created=False, stored=False, reason=reason)
                continue
            with self._store_errors():
                same = repeat_of(self.graph, p.row, window_us, earlier)
            if same is None:
                earlier.append(replace(node, id=-(i + 1)))  # a stand-in id until the write assigns one
            elif same < 0:  # the same words earlier in this call: it answers with that row's ref
                skipped[i] = AddResult(None, ts, created=False, stored=False, reason=REPEAT)
                repeats[i] = -same - 1
            else:
                skipped[i] = AddResult(memory_ref(same), ts, created=False, stored=False, reason=REPEAT)
        return skipped, repeats

    def _late_repeats(self, prepared: list[PreparedAdd], kept: list[int]) -> dict[int, AddResult]:
        """Under the writer lock: the screened rows of ``kept`` that repeat a row another call wrote after
        :meth:`_skipped` looked (two adds of the same words at once), each answered ``stored: false``."""
        late: dict[int, AddResult] = {}
        window_us = int(self.hygiene.repeat_window_s * 1_000_000)
        for i in kept:
            p = prepared[i]
            if not p.screen or p.idempotency_key is not None or not self.hygiene.on_for(p.row.node.tenant):
                continue  # a keyed add is answered by its key (see _write)
            with self._store_errors():
                same = repeat_of(self.graph, p.row, window_us)
            if same is not None and same >= 0:
                late[i] = AddResult(memory_ref(same), from_us(p.row.node.ts_us), created=False, stored=False,
                                    reason=REPEAT)
        return late

    def _write(self, prepared: list[PreparedAdd], vectors: list[list[float]], linked: Linked | None = None,
               attempt: int = 0) -> list[AddResult]:
        results: list[AddResult | None] = [None] * len(prepared)
        to_write: list[int] = []
        batch_keys: dict[tuple[str, str], int] = {}
        for i, p in enumerate(prepared):
            key, tenant = p.idempotency_key, p.row.node.tenant
            if key is not None:
                existing = self._by_idempotency_key(tenant, key)
                if existing is not None:
                    results[i] = existing
                    continue
                if (tenant, key) in batch_keys:
                    continue  # resolved after the write, to the first row with this key
                batch_keys[(tenant, key)] = i
            to_write.append(i)
        if to_write:
            try:
                self._write_rows([prepared[i] for i in to_write], [vectors[i] for i in to_write], linked)
            except StoreError as exc:
                if exc.fields.get("graph_error") != "conflict" or attempt >= CONFLICT_RETRIES:
                    raise
                # another replica wrote one of these idempotency keys first (its unique index said
                # so; this write was undone): answer again, now against what that replica wrote
                return self._write(prepared, vectors, linked, attempt + 1)
        first_by_key = {k: i for k, i in batch_keys.items()}
        for i, p in enumerate(prepared):
            if results[i] is None and i in to_write:
                node = p.row.node
                results[i] = AddResult(memory_ref(node.id), from_us(node.ts_us), p.duplicate_of, True)
        for i, p in enumerate(prepared):
            if results[i] is None:
                assert p.idempotency_key is not None  # only keyed rows wait for their first
                first = results[first_by_key[(p.row.node.tenant, p.idempotency_key)]]
                assert first is not None
                # a repeat answers as a repeat after the write would: the first ref, nothing reported
                results[i] = AddResult(first.ref, first.timestamp, None, False)
        return [r for r in results if r is not None]

    def _by_idempotency_key(self, tenant: str, key: str) -> AddResult | None:
        """The first add under this (scoped, see :func:`scoped_idempotency_key`) key.

        A scoped key only ever matches rows its caller can read: shared rows for a shared
        write, the author's own private rows for a private one.
        """
        with self._store_errors():
            found = self.graph.by_idempotency_key(tenant, key)
        return None if found is None else AddResult(memory_ref(found.id), from_us(found.ts_us), None, False)

    def finish_interrupted(self) -> None:
        """Under the writer lock: finish what a failed undo or vector delete left in the journal.

        Every journal row is stale here (nothing else writes under this lock), so this is
        recovery in-process: once a timed-out or failing vector store answers again, the
        records of refused adds and deferred deletes are cleaned up without a restart.
        Retried at most every CLEANUP_INTERVAL_S while the store keeps failing.
        """
        if time.monotonic() < self._next_cleanup:
            return
        with self._store_errors():
            if not self.graph.journal(1):  # nothing of ours (or of a dead replica's) is pending
                return
        try:
            if vector_store_wedged(self.vectors) is None:
                self.recover()
                return
        except (MemoryCoreError, GraphStoreError):
            pass  # the write itself reports the store's state
        self._next_cleanup = time.monotonic() + CLEANUP_INTERVAL_S

    def staged(self, begin: Callable[[GraphTxn], JournalEntries], vectors: Callable[[], None],
               finish: Callable[[GraphTxn], None], undo: Callable[[JournalEntries], None]) -> None:
        """Journal → vector store → graph, the one sequence every two-store write follows.

        ``begin`` assigns ids and names the intents (journaled and committed first);
        ``vectors`` writes the vector records; ``finish`` writes the graph side, in the same
        transaction that clears the intents. On any failure after the journal committed,
        ``undo`` gets the intents (it removes what the failed write left, best effort:
        recovery finishes what it cannot) and the error propagates.
        """
        with self._store_errors(), self.graph.transaction() as tx:  # 1. journal
            entries = begin(tx)
            tx.journal(entries)
        try:
            vectors()  # 2. vectors
            with self._store_errors(), self.graph.transaction() as tx:  # 3. graph + journal clear
                finish(tx)
                for op, _tenant, ref in entries:
                    if tx.clear_journal(op, [ref]) != 1:  # rolls the graph write back
                        raise StoreUnavailableError(
                            f"Another replica took over the write of {ref} (this one was paused past "
                            "storage.postgres_lease_s) and rolled it back; nothing was written. Retry it.",
                            ref=ref)
        except BaseException:
            undo(entries)
            raise

    def _write_rows(self, prepared: list[PreparedAdd], vectors: list[list[float]], linked: Linked | None) -> None:
        self.finish_interrupted()
        window_us = int(self.limits.duplicate_window_s * 1_000_000)

        def begin(tx: GraphTxn) -> JournalEntries:
            self._assign_ids(tx, prepared)
            _resolve_item_refs(prepared)
            return [(_journal_op(p), p.row.node.tenant, memory_ref(p.row.node.id)) for p in prepared]

        def upsert() -> None:
            by_tenant: dict[str, list[int]] = {}
            for i, p in enumerate(prepared):
                by_tenant.setdefault(p.row.node.tenant, []).append(i)
            for tenant, idx in by_tenant.items():
                rows = [prepared[i].row for i in idx]
                self.vectors.upsert(tenant, [memory_ref(r.node.id) for r in rows], [vectors[i] for i in idx],
                                    [r.content for r in rows], [vector_metadata(r.node) for r in rows])

        def finish(tx: GraphTxn) -> None:
            now_us = time.time_ns() // 1000
            if len(prepared) > 1:
                tx.lock_memories([p.row for p in prepared])
            for p in prepared:
                row, node = p.row, p.row.node
                dup = tx.duplicate_of(row, window_us, p.supersedes) if window_us else None
                p.duplicate_of = None if dup is None else memory_ref(dup)
                tx.write_memory(row)
                for dst, kind in p.edges:
                    tx.write_edge(node.tenant, mem_node(node.id), dst, kind)
                # the old version ends where the new one starts (its valid_from, else its timestamp)
                if p.supersedes is not None and not tx.supersede_memory(node.tenant, p.supersedes,
                                                                        node.valid_since_us):
                    # another writer (a replica) superseded or locked it first: this version is undone
                    raise SupersededError(f"{memory_ref(p.supersedes)} changed while it was being updated "
                                          "(superseded or locked by another writer); read it again.",
                                          ref=memory_ref(p.supersedes))
                if p.entities or p.relations:
                    tx.link_entities(node.tenant, node.id, p.entities, p.relations, now_us)
            if linked is not None:
                linked(tx, [(p.position, p.row.node.id) for p in prepared])

        def undo(_entries: JournalEntries) -> None:
            self._undo_vectors([p.row.node for p in prepared if _journal_op(p) == "add"])
            self._forget_restores([p.row.node for p in prepared if _journal_op(p) == "restore"])

        try:
            self.staged(begin, upsert, finish, undo)
        finally:  # under the writer lock: a call that looked for repeats before this write looks again
            self._generation += 1

    def _assign_ids(self, tx: GraphTxn, prepared: list[PreparedAdd]) -> None:
        """Fresh ids from the shared sequence; imports keep theirs when nothing uses them and they
        are at most MAX_KEPT_ID."""
        kept: dict[int, int] = {}  # position in ``prepared`` -> the id it keeps
        taken: set[int] = set()
        for i, p in enumerate(prepared):
            pid = p.preferred_id
            if pid is not None and 0 < pid <= MAX_KEPT_ID and pid not in taken and not tx.id_in_use(pid):
                kept[i] = pid
                taken.add(pid)
        if taken:
            tx.reserve_ids_through(max(taken))
        fresh = iter(tx.allocate_ids(len(prepared) - len(kept)))
        for i, p in enumerate(prepared):
            p.row = replace(p.row, node=replace(p.row.node, id=kept[i] if i in kept else next(fresh)))

    def _forget_restores(self, rows: list[MemoryNode]) -> None:
        """A failed restore: the vector record stays (it predates the repair); drop the journal entry."""
        if not rows:
            return
        try:
            with self.graph.transaction() as tx:
                tx.clear_journal("restore", [memory_ref(r.id) for r in rows])
        except (MemoryCoreError, GraphStoreError):
            pass  # recovery clears it, and never deletes a restore's record

    def _undo_vectors(self, rows: list[MemoryNode]) -> None:
        """Best effort: if Chroma is down too, the journal entry stays and recovery finishes it."""
        try:
            for row in rows:
                self.vectors.delete(row.tenant, [memory_ref(row.id)])
            with self.graph.transaction() as tx:
                tx.clear_journal("add", [memory_ref(r.id) for r in rows])
        except (MemoryCoreError, GraphStoreError):
            pass

    @contextmanager
    def _store_errors(self) -> Iterator[None]:
        """Graph-store failures (disk full, read-only directory, I/O) as coded store errors."""
        try:
            yield
        except GraphStoreError as exc:
            raise graph_error(exc, "writing the graph store") from exc

    # ---- deletes ---------------------------------------------------------------------------
    def delete(self, tenant: str, mem_id: int) -> bool:
        with self.lock:
            self.finish_interrupted()
            if self.graph.memory(tenant, mem_id) is None:
                return False
            ref = memory_ref(mem_id)
            with self._store_errors(), self.graph.transaction() as tx:
                tx.erase_memory(tenant, mem_id)
                tx.journal([("delete", tenant, ref)])
            try:
                self.vectors.delete(tenant, [ref])
            except StoreError:
                return True  # the graph row is gone; recovery at open removes the vector record
            with self._store_errors(), self.graph.transaction() as tx:
                tx.clear_journal("delete", [ref])
            return True

    # ---- recovery --------------------------------------------------------------------------
    def recover(self) -> list[dict[str, Any]]:
        """Finish or undo what a crash interrupted; returns what it did (for doctor/logs).

        Vector deletes are batched per tenant (one call for a tenant's whole backlog, which
        matters after a long Chroma server outage), then the journal rows are cleared.
        """
        with self.lock, self._store_errors():
            listed = self.graph.journal()
            claimed = set(self.graph.claim_journal(e.seq for e in listed)) if listed else set()
        pending = [e for e in listed if e.seq in claimed]  # another replica may have taken some first
        done: list[dict[str, Any]] = []
        to_delete: dict[str, list[str]] = {}
        for entry in pending:
            op, tenant, item_id = entry.op, entry.tenant, entry.item_id
            item = int(item_id.split(":", 1)[1])
            if op in ("add", "restore") and self.graph.memory(tenant, item) is not None:
                action = "kept (graph write had committed)"
            elif op == "restore":  # the record predates the repair: never ours to delete
                action = "left the vector record of an interrupted restore (doctor restores it again)"
            elif op == "episode" and self.graph.episode(tenant, item) is not None:
                action = "kept episode (graph write had committed)"
            else:
                to_delete.setdefault(tenant, []).append(item_id)
                action = {"add": "rolled back unacknowledged add", "episode": "rolled back unwritten episode"}.get(
                    op, "finished delete")
            done.append({"op": op, "ref": item_id, "tenant": tenant, "action": action})
        for tenant, ids in to_delete.items():
            self.vectors.delete(tenant, ids)
        if pending:
            with self._store_errors(), self.graph.transaction() as tx:
                tx.clear_journal_seqs(e.seq for e in pending)
        return done


def _resolve_item_refs(prepared: list[PreparedAdd]) -> None:
    """Edges and version links to other items of the call, by the ids this attempt assigned (again on
    every attempt); a link to an item not written here is dropped."""
    ids = {p.position: p.row.node.id for p in prepared}
    for p in prepared:
        if p.supersedes_item is not None:
            p.row = replace(p.row, node=replace(p.row.node, supersedes_id=ids.get(p.supersedes_item.position)))
        p.edges = [(mem_node(ids[dst.position]) if isinstance(dst, ItemRef) else dst, kind) for dst, kind in p.links
                   if not isinstance(dst, ItemRef) or dst.position in ids]


def _set_version_state(p: PreparedAdd, state: Mapping[str, Any] | None) -> None:
    """An import's version state (any of MEMORY_STATE_FIELDS) on the row; a ``supersedes_id`` that is an
    :class:`ItemRef` waits for the id its item is given (:func:`_resolve_item_refs`)."""
    if not state:
        return
    unknown = set(state) - set(MEMORY_STATE_FIELDS)
    if unknown:
        raise ValueError(f"not a memory state field: {sorted(unknown)}")
    node = p.row.node
    supersedes = state.get("supersedes_id", node.supersedes_id)
    if isinstance(supersedes, ItemRef):
        p.supersedes_item, supersedes = supersedes, None
    p.row = replace(p.row, node=replace(node, supersedes_id=supersedes, locked=bool(state.get("locked", node.locked)),
                                        valid_to_us=state.get("valid_to_us", node.valid_to_us),
                                        end_reason=state.get("end_reason", node.end_reason),
                                        ended_by=state.get("ended_by", node.ended_by)))


def _journal_op(p: PreparedAdd) -> str:
    return "restore" if p.restore and p.row.node.id == p.preferred_id else "add"


__all__ = ["ItemRef", "PreparedAdd", "WritePath"]
