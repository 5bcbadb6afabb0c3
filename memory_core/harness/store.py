"""The seam between the hook and the memory it reads and writes: :class:`HookStore`.

Two implementations, one contract (the same tests run on both):

- :class:`DirectStore` (here): an open :class:`~memory_core.service.MemoryCore` in the hook's own
  process, through its public methods only;
- the shared server's client (``tools/cli/hook_store.py``): the same calls as MCP tool calls to the
  data directory's shared server, so a running server stays the one writer.

Rows come back as :class:`StoredRow` either way: what the hook needs of a memory, whichever side
shaped it (the shared server's are in its preview tier, ``truncated`` then says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memory_core.errors import InvalidInputError, MemoryCoreError, PoisoningRejectedError, SecretRejectedError
from memory_core.harness.capture import CapturedRow

if TYPE_CHECKING:
    from memory_core.models import MemoryRow
    from memory_core.recall.request import RecallOptions
    from memory_core.service import MemoryCore
    from memory_core.write.request import AddItem

SESSION_PAGE = 100  # query_recent_turns' largest page


@dataclass(frozen=True)
class Binding:
    """Who the hook acts as: a tenant, the agent that authors and views, and whether it may write."""

    tenant: str
    agent: str
    can_write: bool = True


@dataclass(frozen=True)
class StoredRow:
    """One memory (or episode) as the hook reads it."""

    ref: str
    content: str
    type: str = "turn"
    role: str | None = None
    session: str | None = None
    agent: str | None = None
    project_id: str | None = None
    visibility: str = "tenant"
    timestamp: str | None = None  # ISO 8601
    metadata: dict[str, Any] = field(default_factory=dict)
    confidence: float | None = None
    truncated: bool = False  # ``content`` is a preview (the shared server's), ``ref`` expands it
    stored_provenance: str = "agent"  # the row's ``provenance`` field (rows stored before it read ``agent``)
    stored_flags: tuple[str, ...] = ()  # the row's ``flags``: what the poisoning scan found, ``quarantined``

    @classmethod
    def of(cls, row: MemoryRow) -> StoredRow:
        """A library row (full content)."""
        return cls(ref=row.ref, content=row.content, type=row.type, role=row.role, session=row.session,
                   agent=row.agent, project_id=row.project_id, visibility=row.visibility,
                   timestamp=row.timestamp.isoformat(timespec="seconds"), metadata=dict(row.metadata),
                   confidence=row.confidence, stored_provenance=row.provenance, stored_flags=row.flags)

    @property
    def provenance(self) -> str | None:
        """Where the row's words come from (``user``, ``agent``, ``tool``, ``web``, ``import``, ``hook``): its
        stored field, or for a row stored before the field (read as ``agent``) what its metadata says."""
        if self.stored_provenance != "agent":
            return self.stored_provenance
        value = self.metadata.get("provenance")
        return value if isinstance(value, str) else self.stored_provenance

    @property
    def flags(self) -> list[str]:
        """What the poisoning guard flagged the row for (instructions aimed at a model, ``quarantined``): its
        stored field, and what a row's metadata says."""
        value = self.metadata.get("flags")
        extra = [str(f) for f in value] if isinstance(value, list) else []
        return sorted({*self.stored_flags, *extra})


@dataclass(frozen=True)
class Ack:
    """A captured row's fate: stored (``ref``, ``created`` false for a repeat) or ``refused`` (a code)."""

    key: str
    ref: str | None = None
    created: bool = False
    refused: str | None = None


@dataclass(frozen=True)
class Added:
    """What :meth:`HookStore.add_rows` did: one ack per row taken (in any order), and the error that
    stopped it before the rest (None: every row was taken)."""

    acks: list[Ack]
    error: MemoryCoreError | None = None


@dataclass(frozen=True)
class Recovered:
    """A session's newest handoff and its summary."""

    handoff: StoredRow | None
    summary: str | None
    summary_ref: str | None = None
    summary_source: str | None = None  # model | fallback (extractive)


class HookStore(Protocol):
    """What the hook does with memory, bound to one tenant and agent (:class:`Binding`)."""

    def add_rows(self, session: str, project: str | None, rows: Sequence[CapturedRow]) -> Added:
        """Store captured rows, stopping at the first the store could not take (a refusal of that row
        alone, e.g. SECRET_REJECTED, is acknowledged as ``refused`` and the rest go on)."""
        ...

    def add_handoff(self, session: str, project: str | None, content: str, key: str,
                    metadata: dict[str, Any]) -> str:
        """Write the session's handoff (idempotent on ``key``); its ref."""
        ...

    def session_rows(self, session: str, limit: int) -> list[StoredRow]:
        """The session's newest turns, newest first (at most ``limit``)."""
        ...

    def recover(self, session: str) -> Recovered:
        """The session's newest handoff and its summary (``recover_context``)."""
        ...

    def recall(self, query: str, *, limit: int, project: str | None, type: str | None = None,
               session: str | None = None, full: bool = False) -> list[StoredRow]:
        """The most relevant memories the binding may read (an empty query: the newest), at most 50;
        ``full``: whole contents (a handoff to show), not previews."""
        ...

    def close(self) -> None: ...


class DirectStore:
    """:class:`HookStore` over a ``MemoryCore`` open in this process."""

    def __init__(self, core: MemoryCore, binding: Binding, *, owns: bool = False) -> None:
        self.core = core
        self.binding = binding
        self._owns = owns

    def add_rows(self, session: str, project: str | None, rows: Sequence[CapturedRow]) -> Added:
        items = [self._item(session, project, row) for row in rows]
        try:
            results = self.core.add_memories(items)
        except (SecretRejectedError, PoisoningRejectedError):  # a ``reject`` policy: one row refuses the batch; try
            # them one by one
            return self._one_by_one(items, rows)
        except MemoryCoreError as exc:  # all or nothing: none of them was written
            return Added([], exc)
        return Added([Ack(row.key, r.ref, r.created) for row, r in zip(rows, results, strict=True)])

    def _one_by_one(self, items: Sequence[AddItem], rows: Sequence[CapturedRow]) -> Added:
        acks: list[Ack] = []
        for item, row in zip(items, rows, strict=True):
            try:
                result = self.core.add_memories([item])[0]
            except InvalidInputError as exc:  # this row alone is refused (its secret, its empty text): skip it
                acks.append(Ack(row.key, refused=exc.code))
                continue
            except MemoryCoreError as exc:
                return Added(acks, exc)
            acks.append(Ack(row.key, result.ref, result.created))
        return Added(acks)

    def _item(self, session: str, project: str | None, row: CapturedRow) -> AddItem:
        item: AddItem = {"tenant": self.binding.tenant, "session": session, "agent": self.binding.agent,
                                "content": row.content, "type": "turn", "role": row.role,
                                "idempotency_key": row.key, "metadata": row.metadata, "channel": "hook",
                                "provenance": row.provenance}
        if project:
            item["project_id"] = project
        if row.at:
            item["timestamp"] = row.at
        return item

    def add_handoff(self, session: str, project: str | None, content: str, key: str,
                    metadata: dict[str, Any]) -> str:
        b = self.binding
        ref = self.core.create_handoff(b.tenant, session, b.agent, content, project_id=project or None,
                                       idempotency_key=key, metadata=metadata, channel="hook", provenance="hook").ref
        assert ref is not None  # a handoff is never screened by write-time hygiene
        return ref

    def session_rows(self, session: str, limit: int) -> list[StoredRow]:
        rows: list[StoredRow] = []
        cursor: str | None = None
        while len(rows) < limit:
            page = self.core.query_recent_turns(self.binding.tenant, session, min(SESSION_PAGE, limit - len(rows)),
                                                cursor, viewer=self.binding.agent)
            rows += [StoredRow.of(r) for r in page.turns]
            cursor = page.next_cursor
            if cursor is None:
                break
        return rows

    def recover(self, session: str) -> Recovered:
        b = self.binding
        found = self.core.recover_context(b.tenant, session, viewer=b.agent, turns=1, store_summary=b.can_write)
        episode = found.episode
        return Recovered(StoredRow.of(found.handoff) if found.handoff is not None else None,
                         episode.summary if episode is not None else None,
                         episode.ref if episode is not None else None,
                         episode.summary_source if episode is not None else None)

    def recall(self, query: str, *, limit: int, project: str | None, type: str | None = None,
               session: str | None = None, full: bool = False) -> list[StoredRow]:
        options: RecallOptions = {"viewer": self.binding.agent, "limit": limit, "type": type, "session": session}
        if project is not None:
            options["project_id"] = project
        result = self.core.recall(self.binding.tenant, query, **options)
        if result.gate_fallback:
            return []  # every candidate was below the quality gate: nothing here is worth a context's tokens
        return [StoredRow.of(r) for r in result.messages]

    def close(self) -> None:
        if self._owns:
            self.core.close()
