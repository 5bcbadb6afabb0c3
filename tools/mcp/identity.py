"""Who is calling: the ``agent`` (author) and ``viewer`` arguments, and their resolution.

On a connection bound to an agent (an agent-bound bearer token, or ``MEMORY_CORE_AGENT``
over stdio) both are optional and may only name that agent (AGENT_MISMATCH otherwise).
Without an agent binding the caller declares them.

A connection below the admin scope changes only its own rows: :func:`own_only` tells the
service so, and the service compares the row's author with the acting agent.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memory_core import InvalidInputError, Scope
from tools.mcp.context import ServerState

Author = Annotated[str | None, Field()]  # the server instructions say it is the author, your agent id
Viewer = Annotated[str | None, Field()]  # the server instructions say what it shows


def author_of(state: ServerState, agent: str | None) -> str:
    """The author a write names: the bound agent, or the declared one; a write always has one."""
    author = state.scope.resolve_agent(agent, "agent")
    if author is None:
        raise InvalidInputError("'agent' is required.", field="agent")
    return author


def viewer_of(state: ServerState, viewer: str | None) -> str | None:
    """The viewer a read acts as: the bound agent, or the declared one (None: shared rows only)."""
    return state.scope.resolve_agent(viewer, "viewer")


def own_only(state: ServerState) -> bool:
    """Whether this call may correct, lock or delete only rows its agent wrote (every scope below admin)."""
    return not state.scope.access().allows(Scope.ADMIN)
