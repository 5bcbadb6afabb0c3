"""Argument types shared by the MCP tools: their JSON Schema is the agents' contract.

Caps live here, in the schema, not in the library: recall ``limit`` ≤ 50, ``get_contents``
refs ≤ 20, ``query_recent_turns`` limit ≤ 100. Unknown arguments are ignored (pydantic's
default), so newer clients can send fields an older server does not know yet. Known ones are
validated strictly (``tools.mcp_server.ContainerJsonOnly``): ``"10"`` is not an integer, ``1``
is not a boolean, ``true`` is not a number.
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
Session = Annotated[str, Field(description="Session id (no whitespace).")]
Content = Annotated[str, Field(description="The text (not empty, at most $max_content chars).")]
MemoryRef = Annotated[str, Field(description="A ref, e.g. 'mem:42'.")]

RecallQuery = Annotated[
    str, Field(description="What to look for; empty: the most recent memories.")
]
RecallLimit = Annotated[
    int | None,
    Field(ge=1, le=RECALL_LIMIT_CAP, description="Max rows (default $recall_default, at most $recall_cap)."),
]
TypeFilter = Annotated[
    str | None,
    Field(description="Only this type (turn, note, handoff, ...); favours the newest."),
]
SessionFilter = Annotated[str | None, Field(description="Only this session.")]
AgentFilter = Annotated[str | None, Field(description="Only memories written by this agent.")]
ChannelFilter = Annotated[str | None, Field(description="Only this channel.")]
SourceFilter = Annotated[
    str | None,
    Field(description="Prefix of source.id, e.g. 'discord:' or 'discord:123'."),
]
ProjectFilter = Annotated[
    str | None,
    Field(
        description="Omit: all. '': global pool only. 'X': X plus global. '@auto': your configured "
        "project, echoed as resolved_project_id."
    ),
]
ExcludeContents = Annotated[
    list[str] | None,
    Field(
        max_length=EXCLUDE_CONTENTS_CAP,
        description=f"Texts you hold (previews work); rows they prefix, or that prefix them, are skipped. "
        f"At most {EXCLUDE_CONTENTS_CAP}.",
    ),
]
Deep = Annotated[bool, Field(description="No time decay: an exhaustive search.")]
FullContent = Annotated[
    bool,
    Field(
        description="Whole texts instead of previews, within $full_budget chars per response; rows past it "
        "(least relevant first) stay previews and full_content_budget_chars is set."
    ),
]


class ContextEntry(BaseModel):
    """One conversation entry the caller already holds."""

    role: str
    content: str


ContextEntries = Annotated[
    list[ContextEntry],
    Field(
        max_length=CONTEXT_ENTRIES_CAP,
        description=f"Recent conversation {{role, content}}, oldest first, at most {CONTEXT_ENTRIES_CAP}.",
    ),
]

Refs = Annotated[
    list[str],
    Field(
        min_length=1,
        max_length=GET_CONTENTS_REFS_CAP,
        description=f"1 to {GET_CONTENTS_REFS_CAP} refs.",
    ),
]
TurnsLimit = Annotated[
    int,
    Field(
        ge=1,
        le=RECENT_TURNS_LIMIT_CAP,
        description=f"Turns per page (default {RECENT_TURNS_LIMIT_DEFAULT}, at most {RECENT_TURNS_LIMIT_CAP}).",
    ),
]
Cursor = Annotated[
    str | None,
    Field(description="next_cursor of the previous page; omit for the newest."),
]

MemoryType = Annotated[
    str,
    Field(
        description="turn (default), note, decision, error, fact, task, ...; 'handoff' = create_handoff; "
        "'episode' is refused."
    ),
]
Role = Annotated[str | None, Field(description="For turns: user, assistant, system or tool.")]
Channel = Annotated[str | None, Field(description="Where, e.g. 'discord'.")]
Source = Annotated[
    dict[str, object] | None,
    Field(description="Provenance, e.g. {'id': 'discord:123'}."),
]
Project = Annotated[str | None, Field(description="Project; omit for the global pool.")]
Salience = Annotated[
    float | None,
    Field(ge=0.0, le=1.0, allow_inf_nan=False, description="Importance 0..1 (default 0.5)."),
]
Visibility = Annotated[
    Literal["tenant", "agent"],
    Field(description="'tenant' (default): all its agents see it; 'agent': only you."),
]
Timestamp = Annotated[str | None, Field(description="ISO 8601 with timezone; omit for now.")]
IdempotencyKey = Annotated[
    str | None,
    Field(description="A retry with the same key returns the first call's ref."),
]
Metadata = Annotated[dict[str, object] | None, Field(description="Small JSON object kept with it.")]
ENTITIES_CAP = 32
Entities = Annotated[
    list[dict[str, object]] | None,
    Field(max_length=ENTITIES_CAP,
          description=f"What it is about: [{{name, kind?, aliases?}}], at most {ENTITIES_CAP}; names and aliases "
          "resolve case- and space-insensitively to one entity per tenant. Names in the text are found too."),
]
Relations = Annotated[
    list[dict[str, object]] | None,
    Field(max_length=ENTITIES_CAP,
          description=f"[{{from, to, label}}] between entities declared here, at most {ENTITIES_CAP}."),
]
