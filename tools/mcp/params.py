"""Argument types shared by the MCP tools: their JSON Schema is the agents' contract.

Caps live here, in the schema, not in the library: recall ``limit`` ≤ 50, ``get_contents``
refs ≤ 20, ``query_recent_turns`` limit ≤ 100. Arguments are validated strictly
(``tools.mcp.arguments.ContainerJsonOnly``): one a tool does not take is refused, never dropped (a
misspelt ``visibility`` stored a private row shared); ``"10"`` is not an integer, ``1`` is not a
boolean, ``true`` is not a number.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

RECALL_LIMIT_CAP = 50
GET_CONTENTS_REFS_CAP = 20
RECENT_TURNS_LIMIT_CAP = 100
RECENT_TURNS_LIMIT_DEFAULT = 20
EXCLUDE_CONTENTS_CAP = 200
CONTEXT_ENTRIES_CAP = 100

# Described once, in the server instructions; listed (as required) only where no binding fills it.
Tenant = Annotated[str | None, Field()]
Session = Annotated[str, Field()]  # the pattern is checked by the service (INVALID_INPUT names it)
Content = Annotated[str, Field(description="Not empty, at most $max_content chars.")]
MemoryRef = Annotated[str, Field()]  # 'mem:42': every response shows refs

RecallQuery = Annotated[
    str, Field(description="What to find; empty: the most recent memories.")
]
RecallLimit = Annotated[
    int | None,
    Field(ge=1, le=RECALL_LIMIT_CAP, description="Max rows (default $recall_default, at most $recall_cap)."),
]
TypeFilter = Annotated[
    str | None,
    Field(description="Only this type; favours the newest (handoffs: newest first)."),
]
SessionFilter = Annotated[str | None, Field()]  # only this session: the name says it
AgentFilter = Annotated[str | None, Field(description="Only this author's memories.")]
ChannelFilter = Annotated[str | None, Field()]  # only this channel
SourceFilter = Annotated[
    str | None,
    Field(description="Prefix of source.id, e.g. 'discord:'."),
]
ProjectFilter = Annotated[
    str | None,
    Field(
        description="Omit: all; '': global only; 'X': X and global; '@auto': your configured project "
        "(echoed as resolved_project_id)."
    ),
]
ExcludeContents = Annotated[
    list[str] | None,
    Field(
        max_length=EXCLUDE_CONTENTS_CAP,
        description="Texts you hold (previews work): their rows are skipped.",
    ),
]
Deep = Annotated[bool, Field(description="No time decay; exhaustive.")]
AsOf = Annotated[str | None, Field(description="ISO 8601: what was valid then.")]
AsOfRead = Annotated[str | None, Field()]  # get_contents, check_memory, related: as recall's as_of
Collapse = Annotated[bool | None, Field()]  # omitted: true; the recall description says what it does
FullContent = Annotated[
    bool,
    Field(
        description="Whole texts, up to $full_budget chars a response (the least relevant stay previews)."
    ),
]


class ContextEntry(BaseModel):  # one conversation entry the caller holds (no docstring: it would be listed)

    role: str
    content: str


ContextEntries = Annotated[
    list[ContextEntry],
    Field(
        max_length=CONTEXT_ENTRIES_CAP,
        description="Recent conversation, oldest first.",
    ),
]

Refs = Annotated[list[str], Field(min_length=1, max_length=GET_CONTENTS_REFS_CAP)]
TurnsLimit = Annotated[
    int,
    Field(
        ge=1,
        le=RECENT_TURNS_LIMIT_CAP,
    ),
]
Cursor = Annotated[
    str | None,
    Field(description="From the previous page; omit for the newest."),
]

MemoryType = Annotated[
    str,
    Field(
        description="turn, note, decision, error, fact, ...; handoffs: create_handoff."
    ),
]
Role = Annotated[str | None, Field(description="Turns: user, assistant, system or tool.")]
Channel = Annotated[str | None, Field()]  # where it was said: the name says it
Source = Annotated[
    dict[str, object] | None,
    Field(description="e.g. {'id': 'discord:123'}."),
]
Project = Annotated[str | None, Field(description="Omit: the global pool.")]
Salience = Annotated[
    float | None,
    Field(ge=0, le=1, allow_inf_nan=False, description="Importance (default 0.5)."),
]
Visibility = Annotated[
    Literal["tenant", "agent"],
    Field(description="'agent': only you see it; 'tenant': every agent."),
]
Timestamp = Annotated[str | None, Field(description="ISO 8601 with timezone; omit: now.")]
ValidFrom = Annotated[str | None, Field(description="When it became true; omit: timestamp.")]
ReviewAfter = Annotated[str | None, Field(description="Recall marks it review_due after.")]
# where the content came from; omitted: user for role=user, else agent (the add description says so)
Provenance = Annotated[Literal["user", "agent", "tool", "web", "import", "hook"] | None, Field()]
IncludeQuarantined = Annotated[bool, Field()]  # the recall description says what it does
IdempotencyKey = Annotated[
    str | None,
    Field(description="Calls with the same key store once."),
]
Metadata = Annotated[dict[str, object] | None, Field(description="Small JSON object.")]
ENTITIES_CAP = 32
Entities = Annotated[
    list[dict[str, object]] | None,
    Field(max_length=ENTITIES_CAP,
          description="[{name, kind?, aliases?}] it is about; names in content count too."),
]
Relations = Annotated[
    list[dict[str, object]] | None,
    Field(max_length=ENTITIES_CAP,
          description="[{from, to, label}] between declared entities."),
]
