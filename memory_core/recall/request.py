"""One recall's request: its options defined once, for the library, the MCP tools, the CLI and the inspector.

:class:`RecallOptions` names every filter and switch a caller may pass beside the tenant and the
query (``core.recall(tenant, query, type="decision", limit=5)``); a key left out takes its
default, and a key it does not name is refused (``INVALID_INPUT``): a typo must not silently
change nothing. :class:`RecallRequest` is what the engine runs: the tenant, the query, the
options, and what :meth:`memory_core.service.MemoryCore.recall_with_context` adds (the conversation).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypedDict

from memory_core.errors import InvalidInputError


class RecallOptions(TypedDict, total=False):
    """A recall's filters and switches (every key optional)."""

    viewer: str | None  # the agent recalling: its private memories join the shared ones
    limit: int | None  # rows, at most recall.scan_window (default recall.default_limit)
    type: str | None  # only this type; a stronger recency, and handoffs come newest first
    session: str | None
    agent: str | None  # only memories this agent wrote
    channel: str | None
    source_id: str | None  # a prefix of source.id
    project_id: str | None  # omitted: all; '': the global pool; 'X': X and the global pool; '@auto'
    exclude_contents: Sequence[str] | None  # strings the caller holds: rows they prefix are left out
    deep: bool  # no time decay, every version and every copy
    preset: str | None  # a retrieval preset (memory_core.recall.presets; default recall.preset)
    now: datetime | str | None  # the time relative dates in the query count from (default: the newest memory)
    include_superseded: bool  # also versions a newer one corrected, marked valid_to
    as_of: datetime | str | None  # what was valid at that instant (ISO 8601 with a timezone): versions current then
    include_stale: bool  # rows a newer memory contradicts rank as they would (not moved below it, not marked)
    collapse: bool  # copies of one fact as one row (default true; deep shows them all)
    include_quarantined: bool  # also rows the poisoning policy quarantined (flags hold "quarantined")


OPTIONS = frozenset(RecallOptions.__optional_keys__ | RecallOptions.__required_keys__)


def check_options(options: Mapping[str, object]) -> None:
    """Refuse the keys :class:`RecallOptions` does not name, each said, with the option it was likely meant for."""
    unknown = [k for k in options if k not in OPTIONS]
    if not unknown:
        return
    said = []
    for key in unknown:
        close = difflib.get_close_matches(str(key), OPTIONS, n=1)
        said.append(f"'{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""))
    raise InvalidInputError(
        f"Unknown recall option{'s' if len(unknown) > 1 else ''} {', '.join(said)}; "
        f"the options are {', '.join(sorted(OPTIONS))}.", field=str(unknown[0]))


@dataclass(frozen=True)
class RecallRequest:
    """A recall as the engine runs it (its options checked: a key :class:`RecallOptions` does not name is refused)."""

    tenant: str
    query: str
    options: RecallOptions = field(default_factory=lambda: RecallOptions())
    context_text: str | None = None  # recall_with_context: the recent conversation, embedded with the query
    held_context: Sequence[str] = ()  # recall_with_context: the entries the caller holds (never returned)

    def __post_init__(self) -> None:
        check_options(self.options)
