"""Corrections with history, and locks: ``update_memory``, ``lock_memory``, ``unlock_memory``, ``history``.

A correction never edits a memory in place. ``update`` writes a NEW version (a new ref) through
the journaled write path — journal, Chroma, then one graph transaction that writes the new row
(``supersedes_id`` = the old id), its SUPERSEDES edge to the old version, and ends the old
version's validity (``valid_to_us`` = the new version's timestamp). A crash at any instant
leaves either the old state or the whole new one (recovery rolls back an unfinished add).

Rules, the same at every boundary:

- Only the head of a chain (a current version) can be updated: updating an older version is
  SUPERSEDED, naming the head the caller can read (``fields["head"]``), so a stale edit never
  silently overwrites a newer correction.
- A locked memory can be neither updated nor deleted (LOCKED) until it is unlocked.
- An agent-private memory is updated, locked or unlocked only by its author (for anyone else
  it reads as missing: NOT_FOUND); the operator (CLI) may act on any memory of the tenant.
- ``own_only`` (a write-scoped MCP connection): only memories the acting agent wrote;
  another's shared memory is SCOPE_DENIED (:func:`memory_core.reads.check_own`).
- Handoffs are not corrected in place: a new handoff (``create_handoff``) supersedes the last.
- A fact can be ended without a replacement (``end``: wrong, or no longer true): its validity ends now
  (``valid_to_us``) with the reason and who ended it; the row stays, readable by ``history`` and by
  ``as_of`` reads before the end. ``revive`` undoes an end (not a correction: update the head instead).
  An ended memory is not updated (SUPERSEDED, ``ended: true``): revive it first.
- The new version keeps the old one's session, type, visibility, role, channel, source and
  project; content, metadata (replaced, not merged) and salience are the old ones unless given.
  Its author is the agent that corrected it (the old author when none is named). Its provenance is the
  old one's when the content is kept, and the writer's (by role, as an add's) when new content is given;
  the poisoning scan runs on the new version's content like on any add's.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from graph.api import SUPERSEDES, GraphStore, MemoryNode, mem_node
from memory_core import validation as v
from memory_core.errors import InvalidInputError, LockedError, NotFoundError, SupersededError
from memory_core.models import AddResult, CheckResult, MemoryRow, from_us, iso
from memory_core.reads import Reader, check_own, row_from_attrs, visible
from memory_core.refs import MEMORY, memory_ref, parse_ref
from memory_core.secret_guard import Scan
from memory_core.versions.chain import ChainAt, chain_of, head_of
from memory_core.write.path import WritePath
from memory_core.write.request import AddItem

HANDOFF = "handoff"
MAX_REASON_CHARS = 500


@dataclass(frozen=True)
class EndResult:
    """An end or a revive: the memory, whether its state changed, and its validity now."""

    ref: str
    changed: bool
    valid_to: str | None
    reason: str | None = None
    redacted: dict[str, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ref": self.ref, "changed": self.changed, "valid_to": self.valid_to}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.redacted:
            out["redacted"] = dict(self.redacted)
        return out


@dataclass(frozen=True)
class UpdateResult:
    """The new version: its ref and time, and the version it supersedes."""

    added: AddResult
    supersedes: str

    def to_dict(self) -> dict[str, Any]:
        return {**self.added.to_dict(), "supersedes": self.supersedes}


class VersionService:
    """Versions and locks for :class:`memory_core.service.MemoryCore`."""

    def __init__(self, graph: GraphStore, reader: Reader, writer: WritePath) -> None:
        self.graph = graph
        self.reader = reader
        self.writer = writer

    def _target(self, tenant: str, ref: str, agent: str | None, operator: bool, own_only: bool = False,
                field: str = "agent") -> MemoryNode:
        """The memory ``ref`` names, as ``agent`` (or the operator) may act on it; NOT_FOUND otherwise,
        SCOPE_DENIED when ``own_only`` and ``agent`` did not write it."""
        parsed = parse_ref(ref)
        if parsed.kind != MEMORY:
            raise InvalidInputError(f"{parsed} is an episode; only memories have versions and locks.", field="ref")
        attrs = self.graph.memory(tenant, parsed.id)
        if attrs is None or not (operator or visible(attrs, agent)):
            raise NotFoundError(f"No memory {parsed} in this tenant.", ref=str(parsed))
        if own_only:
            check_own(attrs, agent, field)
        return attrs

    def update(
        self, tenant: str, ref: str, *, agent: str | None, operator: bool, content: str | None = None,
        metadata: Mapping[str, Any] | None = None, salience: float | None = None, own_only: bool = False,
        valid_from: object = None,
    ) -> UpdateResult:
        """Write a new version of ``ref`` that supersedes it (see the module's rules). ``valid_from``: when the
        new version became true, if not now (after the old one began); the old one ends there."""
        tenant = v.tenant(tenant)
        agent = v.name(agent, "agent", required=False)
        valid_from_us = v.instant_us(valid_from, "valid_from")
        if content is None and metadata is None and salience is None and valid_from_us is None:
            raise InvalidInputError("Give at least one of content, metadata, salience or valid_from to update.")
        # Checked here, outside the writer lock (the new version is embedded meanwhile, as an add's
        # is); the write re-checks in its graph transaction, where a version another writer
        # superseded or locked in between refuses it (SUPERSEDED) and nothing is written.
        old = self._target(tenant, ref, agent, operator, own_only)
        if old.type == HANDOFF:
            raise InvalidInputError("A handoff is not corrected in place; write a new handoff "
                                    "(create_handoff), which supersedes the last one.", field="ref")
        self._check_head(tenant, old, agent, operator)
        if old.locked:
            raise LockedError(f"{memory_ref(old.id)} is locked; unlock it first.", ref=memory_ref(old.id))
        if valid_from_us is not None and valid_from_us <= old.valid_since_us:
            raise InvalidInputError(f"'valid_from' must be after {memory_ref(old.id)} became valid "
                                    f"({iso(from_us(old.valid_since_us))}).", field="valid_from")
        text = content
        if text is None:
            text = self.graph.contents(tenant, [old.id]).get(old.id)
            if text is None:
                raise NotFoundError(f"No memory {memory_ref(old.id)} in this tenant.", ref=memory_ref(old.id))
        # the new version is later than the old one, even when the old one carried a future timestamp
        ts_us = max(time.time_ns() // 1000, old.ts_us + 1)
        item: AddItem = {  # what the new version carries over (see the module's rules)
            "tenant": tenant, "session": old.session, "agent": agent or old.agent, "content": text,
            "type": old.type, "role": old.role, "channel": old.channel, "project_id": old.project_id,
            "visibility": old.visibility, "source": dict(old.source),
            "metadata": dict(old.metadata) if metadata is None else metadata,
            "salience": old.salience if salience is None else salience, "timestamp": from_us(ts_us),
            "valid_from": None if valid_from_us is None else from_us(valid_from_us),
            "provenance": old.provenance if content is None else None,
        }
        added = self.writer.add_many([item], edges=[[(mem_node(old.id), SUPERSEDES)]], supersedes=[old.id])[0]
        return UpdateResult(added, memory_ref(old.id))

    def _check_head(self, tenant: str, old: MemoryNode, viewer: str | None, operator: bool) -> None:
        if old.valid_to_us is None:
            return
        if old.end_reason is not None:
            raise SupersededError(f"{memory_ref(old.id)} was ended ({old.end_reason}); revive it before "
                                  "updating it.", ref=memory_ref(old.id), head=None, ended=True)
        head = head_of(self.graph, tenant, old, viewer, private_too=operator)
        raise SupersededError(
            f"{memory_ref(old.id)} was corrected by a newer version; update the newest one"
            + (f" ({memory_ref(head.id)})." if head is not None and head.id != old.id else "."),
            ref=memory_ref(old.id), head=memory_ref(head.id) if head is not None else None,
        )

    def set_lock(self, tenant: str, ref: str, locked: bool, *, agent: str | None, operator: bool,
                 own_only: bool = False) -> bool:
        """Lock or unlock ``ref``; returns whether its state changed (False: it already was)."""
        tenant = v.tenant(tenant)
        agent = v.name(agent, "agent", required=False)
        with self.writer.lock:
            attrs = self._target(tenant, ref, agent, operator, own_only, field="viewer")
            if attrs.locked == locked:
                return False
            with self.graph.transaction() as tx:  # store failures: coded by the service's decorator
                tx.set_memory_state(tenant, attrs.id, {"locked": locked})
            return True

    def end(self, tenant: str, ref: str, reason: object, *, agent: str | None, operator: bool,
            own_only: bool = False) -> EndResult:
        """End ``ref``'s validity now without a replacement, saying why (see the module's rules); changed
        False when it was ended already. SUPERSEDED for a corrected version, LOCKED when locked."""
        tenant = v.tenant(tenant)
        agent = v.name(agent, "agent", required=False)
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON_CHARS:
            raise InvalidInputError(f"'reason' must be a non-empty string of at most {MAX_REASON_CHARS} characters "
                                    "(why the fact ended).", field="reason")
        scan = Scan()
        text = self.writer.guard.text(reason.strip(), "reason", scan)
        redacted = self.writer.guard.finish(scan, "reason")  # SECRET_REJECTED under reject
        with self.writer.lock:
            attrs = self._target(tenant, ref, agent, operator, own_only)
            if attrs.type == HANDOFF:
                raise InvalidInputError("A handoff is not ended; a newer handoff supersedes it.", field="ref")
            if attrs.end_reason is not None:
                return EndResult(memory_ref(attrs.id), False, _iso_us(attrs.valid_to_us), attrs.end_reason)
            self._check_head(tenant, attrs, agent, operator)
            if attrs.locked:
                raise LockedError(f"{memory_ref(attrs.id)} is locked; unlock it first.", ref=memory_ref(attrs.id))
            now_us = max(time.time_ns() // 1000, attrs.valid_since_us + 1)
            with self.graph.transaction() as tx:
                if not tx.end_memory(tenant, attrs.id, now_us, text, agent):
                    raise _changed_meanwhile(attrs.id)
            return EndResult(memory_ref(attrs.id), True, _iso_us(now_us), text, redacted or None)

    def revive(self, tenant: str, ref: str, *, agent: str | None, operator: bool, own_only: bool = False) -> EndResult:
        """Undo :meth:`end`: ``ref`` is valid again (changed False when it was not ended). A corrected version
        is SUPERSEDED: a correction is undone by correcting the head."""
        tenant = v.tenant(tenant)
        agent = v.name(agent, "agent", required=False)
        with self.writer.lock:
            attrs = self._target(tenant, ref, agent, operator, own_only)
            if attrs.end_reason is None:
                self._check_head(tenant, attrs, agent, operator)
                return EndResult(memory_ref(attrs.id), False, None)
            if attrs.locked:
                raise LockedError(f"{memory_ref(attrs.id)} is locked; unlock it first.", ref=memory_ref(attrs.id))
            with self.graph.transaction() as tx:
                if not tx.end_memory(tenant, attrs.id, None, None, None):
                    raise _changed_meanwhile(attrs.id)
            return EndResult(memory_ref(attrs.id), True, None)

    def at(self, tenant: str, viewer: str | None, as_of: object, *, operator: bool = False) -> ChainAt | None:
        """The resolver of an ``as_of`` read (None when ``as_of`` is None); INVALID_INPUT for a malformed instant."""
        at_us = v.instant_us(as_of, "as_of")
        return None if at_us is None else ChainAt(self.graph, tenant, viewer, at_us, private_too=operator)

    def check(self, tenant: str, ref: str, viewer: str | None, as_of: object = None) -> CheckResult:
        """One memory (:meth:`memory_core.reads.Reader.check`), with its version chain in
        ``neighbours["versions"]`` (oldest first) when it has one; ``as_of``: its version valid then."""
        result = self.reader.check(tenant, ref, viewer, self.at(tenant, viewer, as_of))
        versions = self.chain_summary(tenant, result.memory.id, viewer) if result.memory.type != "episode" else []
        if len(versions) > 1:
            result.neighbours["versions"] = versions
        return result

    def chain_summary(self, tenant: str, mem_id: int, viewer: str | None) -> list[dict[str, Any]]:
        """The readable versions of a memory's chain, oldest first, as {ref, timestamp, valid_to?}."""
        attrs = self.graph.memory(tenant, mem_id)
        if attrs is None or (attrs.supersedes_id is None and (attrs.valid_to_us is None or attrs.end_reason)):
            return []
        out = []
        for n in chain_of(self.graph, tenant, attrs, viewer):
            entry: dict[str, Any] = {"ref": memory_ref(n.id), "timestamp": iso(from_us(n.ts_us))}
            if n.valid_to_us is not None:
                entry["valid_to"] = iso(from_us(n.valid_to_us))
            if n.end_reason is not None:
                entry["ended"] = {"reason": n.end_reason, "by": n.ended_by}
            out.append(entry)
        return out

    def history(self, tenant: str, ref: str, *, viewer: str | None, operator: bool) -> list[MemoryRow]:
        """Every version of ``ref``'s chain that the caller can read, oldest first."""
        tenant = v.tenant(tenant)
        viewer = v.name(viewer, "viewer", required=False)
        attrs = self._target(tenant, ref, viewer, operator)
        nodes = chain_of(self.graph, tenant, attrs, viewer, private_too=operator)
        contents = self.graph.contents(tenant, [n.id for n in nodes])
        return [row_from_attrs(n, contents[n.id]) for n in nodes if n.id in contents]


def _iso_us(ts_us: int | None) -> str | None:
    return None if ts_us is None else iso(from_us(ts_us))


def _changed_meanwhile(mem_id: int) -> SupersededError:
    """Another writer (a replica) corrected, ended, revived or locked the memory between the check and the write."""
    return SupersededError(f"{memory_ref(mem_id)} changed while it was being ended or revived (corrected, ended "
                           "or locked by another writer); read it again.", ref=memory_ref(mem_id))
