"""What a connection may do: the access scopes a token (or ``MEMORY_CORE_SCOPE``) carries.

- ``read``: only tools that change nothing (recall, get_contents, recover_context without
  storing a summary, ...).
- ``write`` (the default): also add memories and handoffs, summarize sessions, and correct,
  lock, unlock or delete the caller's *own* rows (those its agent wrote).
- ``admin``: also correct, lock, unlock or delete any row the connection can read, and the
  operator tools.

Ordered: each scope allows everything the ones before it do. Stdlib only: the stdio bridge
imports it.
"""

from __future__ import annotations

from enum import StrEnum


class Scope(StrEnum):
    READ = "read"
    WRITE = "write"
    ADMIN = "admin"

    def allows(self, needed: Scope) -> bool:
        """Whether a connection of this scope may do what ``needed`` guards."""
        return _RANK[self] >= _RANK[needed]


_RANK = {Scope.READ: 0, Scope.WRITE: 1, Scope.ADMIN: 2}
DEFAULT_SCOPE = Scope.WRITE  # a token entry or a binding that names no scope
SCOPE_NAMES = tuple(scope.value for scope in Scope)


def parse_scope(value: object) -> Scope | None:
    """The scope ``value`` names, or None when it names none."""
    return Scope(value) if isinstance(value, str) and value in SCOPE_NAMES else None
