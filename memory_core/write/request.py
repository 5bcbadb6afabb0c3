"""One add's request: the fields a caller may give a memory, defined once for the library, the MCP tools,
the CLI and the importers.

:class:`MemoryFields` names every optional field of a memory beside its tenant, session, agent and
content (``core.add_memory(tenant, session, agent, content, channel="ops", salience=0.8)``); a key
left out, or None, takes its default. :class:`AddFields` adds the ``type`` (``create_handoff`` takes
:class:`MemoryFields`: its type is ``handoff``). :class:`AddItem` is one item of a batch
(``add_memories``, imports): the four required fields and the optional ones, in one dict. The names
each entry point accepts derive from these types, and :func:`refuse_unknown` turns a name outside
them into INVALID_INPUT naming it (a misspelt option must never be dropped: ``visibilty="agent"``
would store a private note shared). :func:`memory_core.write.add_rows.prepare_add` validates an item
into the row the graph stores (:class:`graph.api.MemoryRecord`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

from memory_core.errors import InvalidInputError


class MemoryFields(TypedDict, total=False):
    """A memory's optional fields (every key optional; None: the default)."""

    role: str | None  # turns: user, assistant, system or tool
    channel: str | None  # where it was said
    source: Mapping[str, Any] | None  # e.g. {"id": "discord:123"}; recall filters on a prefix of source.id
    project_id: str | None  # None: the global pool
    salience: float | None  # 0..1; default 0.5 (handoffs 0.95)
    visibility: str | None  # "tenant" (default): every agent; "agent": only its author
    timestamp: datetime | str | None  # ISO 8601 with a timezone; default now
    valid_from: datetime | str | None  # when the fact became true, if not at its timestamp (as_of reads it)
    review_after: datetime | str | None  # when it should be checked again: recall marks it review_due after
    idempotency_key: str | None  # a retry with the same key returns the first ref and writes nothing
    metadata: Mapping[str, Any] | None  # a small JSON object
    entities: Sequence[Mapping[str, Any]] | None  # [{name, kind?, aliases?}] it is about (at most 32)
    relations: Sequence[Mapping[str, Any]] | None  # [{from, to, label}] between its entities (at most 32)
    provenance: str | None  # where the content came from: user, agent, tool, web, import, hook (default by role)


class AddFields(MemoryFields, total=False):
    """``add_memory``'s optional fields: a memory's, and its type."""

    type: str | None  # turn (default), note, decision, error, fact, …; "handoff" is create_handoff


class AddItem(AddFields):
    """One memory of a batch (``add_memories``, imports, corrections): who wrote what where, and its fields."""

    tenant: str
    session: str
    agent: str
    content: str


MEMORY_FIELD_NAMES = frozenset(MemoryFields.__optional_keys__)
ADD_FIELD_NAMES = frozenset(AddFields.__optional_keys__)
ADD_ITEM_NAMES = frozenset(AddItem.__required_keys__ | AddItem.__optional_keys__)


def refuse_unknown(given: Iterable[str], allowed: frozenset[str], call: str) -> None:
    """INVALID_INPUT naming the first of ``given`` that ``call`` does not take (nothing is written)."""
    unknown = sorted(set(given) - allowed)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        raise InvalidInputError(f"{call} takes no {names}; its fields are {', '.join(sorted(allowed))}.",
                                field=unknown[0])
