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
RECALL_LIMIT_DEFAULT = 10
GET_CONTENTS_REFS_CAP = 20
RECENT_TURNS_LIMIT_CAP = 100
RECENT_TURNS_LIMIT_DEFAULT = 20
EXCLUDE_CONTENTS_CAP = 200
CONTEXT_ENTRIES_CAP = 100

Tenant = Annotated[
    str | None,
    Field(
        description="Tenant id. Optional when this connection is bound to a tenant (bearer token or server "
        "config); required otherwise. Naming a tenant other than the bound one fails with TENANT_MISMATCH."
    ),
]
Viewer = Annotated[
    str | None,
    Field(description="Your agent id. Memories written with visibility='agent' are returned only to their author."),
]
Session = Annotated[str, Field(description="Session id (1-128 printable characters, no whitespace).")]
Agent = Annotated[str, Field(description="Id of the agent writing this memory (its author).")]
Content = Annotated[str, Field(description="The text to remember (not empty).")]
MemoryRef = Annotated[str, Field(description="A ref as returned by other tools, e.g. 'mem:42'.")]

RecallQuery = Annotated[
    str, Field(description="What to look for, in natural language. Empty returns the most recent memories.")
]
RecallLimit = Annotated[
    int,
    Field(
        ge=1,
        le=RECALL_LIMIT_CAP,
        description=f"Max memories to return (default 10, at most {RECALL_LIMIT_CAP}).",
    ),
]
TypeFilter = Annotated[
    str | None,
    Field(description="Only this type (turn, note, handoff, decision, error, ...). Newest-first weighting applies."),
]
SessionFilter = Annotated[str | None, Field(description="Only memories of this session.")]
AgentFilter = Annotated[str | None, Field(description="Only memories written by this agent.")]
ChannelFilter = Annotated[str | None, Field(description="Only memories of this channel (e.g. 'chat', 'discord').")]
SourceFilter = Annotated[
    str | None,
    Field(description="Prefix match on source.id: 'discord:12345' for one user, 'discord:' for all of Discord."),
]
ProjectFilter = Annotated[
    str | None,
    Field(
        description="Omit: all projects. '': global pool only. 'X': project X plus the global pool. '@auto': "
        "your default project from the server's operating context, echoed as resolved_project_id "
        "(read it: without such configuration '@auto' is used literally)."
    ),
]
ExcludeContents = Annotated[
    list[str] | None,
    Field(
        max_length=EXCLUDE_CONTENTS_CAP,
        description="Texts you already hold (previews work): a memory is skipped when its text and "
        f"one of these are prefixes of each other after normalization. At most {EXCLUDE_CONTENTS_CAP}.",
    ),
]
Deep = Annotated[bool, Field(description="Disable time decay for an exhaustive search (default false).")]
FullContent = Annotated[
    bool,
    Field(
        description="Return whole texts instead of previews (default false). Bounded by a "
        "per-response budget (default 200,000 chars): rows that do not fit, least relevant first, stay "
        "previews and the response carries full_content_budget_chars."
    ),
]


class ContextEntry(BaseModel):
    """One conversation entry the caller already holds."""

    role: str = Field(description="'user', 'assistant', 'system' or 'tool'.")
    content: str = Field(description="The entry's text.")


ContextEntries = Annotated[
    list[ContextEntry],
    Field(
        max_length=CONTEXT_ENTRIES_CAP,
        description=f"The recent conversation (oldest first, at most {CONTEXT_ENTRIES_CAP} "
        "entries). It steers the search and its texts are excluded from the results.",
    ),
]

Refs = Annotated[
    list[str],
    Field(
        min_length=1,
        max_length=GET_CONTENTS_REFS_CAP,
        description=f"Refs to expand (1 to {GET_CONTENTS_REFS_CAP}), e.g. ['mem:42', 'mem:43'].",
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
    Field(description="next_cursor from the previous page, exactly as returned; omit for the newest."),
]

MemoryType = Annotated[
    str,
    Field(
        description="turn (default), note, decision, error, fact, task, observation, ... 'handoff' is the same "
        "as create_handoff (supersedes the session's previous handoff); 'episode' is refused (summaries "
        "come from summarize_session)."
    ),
]
Role = Annotated[str | None, Field(description="For turns: 'user', 'assistant', 'system' or 'tool'.")]
Channel = Annotated[str | None, Field(description="Where it happened, e.g. 'chat', 'discord'.")]
Source = Annotated[
    dict[str, object] | None,
    Field(description="Provenance, e.g. {'id': 'discord:123'}; source_id filters on it."),
]
Project = Annotated[str | None, Field(description="Project bucket; omit for the global pool.")]
Salience = Annotated[
    float | None,
    Field(ge=0.0, le=1.0, allow_inf_nan=False, description="Importance 0..1 (default 0.5; handoffs 0.95)."),
]
Visibility = Annotated[
    Literal["tenant", "agent"],
    Field(description="'tenant' (default): every agent of the tenant sees it. 'agent': only you, the author."),
]
Timestamp = Annotated[str | None, Field(description="ISO-8601 with timezone; omit for now. For imports and replays.")]
IdempotencyKey = Annotated[
    str | None,
    Field(description="Retry-safe key: repeating a call with the same key returns the first call's ref."),
]
Metadata = Annotated[dict[str, object] | None, Field(description="Small JSON object stored with the memory.")]
