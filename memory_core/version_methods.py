"""MemoryCore's corrections and locks (mixed into :class:`memory_core.service.MemoryCore`).

The work is :class:`memory_core.versions.VersionService`'s; these are the public, coded entry
points: an agent's (its private memories only its own) and the operator's (the CLI: any memory).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memory_core.models import MemoryRow
from memory_core.store_errors import coded_graph_errors
from memory_core.versions import UpdateResult, VersionService


class VersionMethods:
    """``versions`` is set by MemoryCore.__init__."""

    versions: VersionService

    @coded_graph_errors("updating a memory")
    def update_memory(
        self, tenant: str, ref: str, *, content: str | None = None, metadata: Mapping[str, Any] | None = None,
        salience: float | None = None, agent: str | None = None, own_only: bool = False,
    ) -> UpdateResult:
        """Correct a memory: a new version (new ref) that SUPERSEDES ``ref``, which is kept with its
        ``valid_to``. ``agent`` acts (and authors the new version; default the old author); another
        agent's private memory reads as missing. SUPERSEDED for an older version, LOCKED when locked;
        ``own_only`` (a write scope): SCOPE_DENIED unless ``agent`` wrote it."""
        return self.versions.update(tenant, ref, agent=agent, operator=False, content=content, metadata=metadata,
                                    salience=salience, own_only=own_only)

    @coded_graph_errors("updating a memory")
    def update_memory_as_operator(
        self, tenant: str, ref: str, *, content: str | None = None, metadata: Mapping[str, Any] | None = None,
        salience: float | None = None, agent: str | None = None,
    ) -> UpdateResult:
        """The operator's update (CLI): any memory of the tenant, private or not."""
        return self.versions.update(tenant, ref, agent=agent, operator=True, content=content, metadata=metadata,
                                    salience=salience)

    @coded_graph_errors("locking a memory")
    def lock_memory(self, tenant: str, ref: str, *, viewer: str | None = None, own_only: bool = False) -> bool:
        """Lock a memory against update and delete (LOCKED) until unlocked; False if it already was.
        ``own_only`` (a write scope): SCOPE_DENIED unless ``viewer`` wrote it."""
        return self.versions.set_lock(tenant, ref, True, agent=viewer, operator=False, own_only=own_only)

    @coded_graph_errors("unlocking a memory")
    def unlock_memory(self, tenant: str, ref: str, *, viewer: str | None = None, own_only: bool = False) -> bool:
        """Undo :meth:`lock_memory`; False if it was not locked. ``own_only`` as for lock_memory."""
        return self.versions.set_lock(tenant, ref, False, agent=viewer, operator=False, own_only=own_only)

    @coded_graph_errors("locking a memory")
    def set_lock_as_operator(self, tenant: str, ref: str, locked: bool) -> bool:
        """The operator's lock or unlock (CLI): any memory of the tenant."""
        return self.versions.set_lock(tenant, ref, locked, agent=None, operator=True)

    @coded_graph_errors("reading a memory's history")
    def history(self, tenant: str, ref: str, *, viewer: str | None = None) -> list[MemoryRow]:
        """Every version of ``ref``'s chain the viewer can read, oldest first."""
        return self.versions.history(tenant, ref, viewer=viewer, operator=False)

    @coded_graph_errors("reading a memory's history")
    def history_as_operator(self, tenant: str, ref: str) -> list[MemoryRow]:
        """The operator's history (CLI): private versions included."""
        return self.versions.history(tenant, ref, viewer=None, operator=True)
