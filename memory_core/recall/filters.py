"""Recall filters, evaluated on AGENT_MEMORY graph nodes and pushed down to each retriever.

The graph node is the one source of truth for filtering; the Chroma ``where`` and the SQL
clause are pushdowns so that a filter applies *before* each retriever's top-N cut (a
matching row can never be crowded out by rows of other types). Every candidate is then
re-checked against the node, so a pushdown that is looser than the predicate is harmless.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graph.api import EpisodeNode, MemoryNode, RowFilter
from memory_core import validation as v
from memory_core.errors import InvalidInputError
from memory_core.write.poisoning import QUARANTINED

AUTO_PROJECT = "@auto"
MAX_SOURCE_ID = 256  # stored source.id values are capped at 256 too (validation.KEY_PATTERN)


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class ProjectScope:
    """None = all projects; '' = global pool only; 'X' = X ∪ global pool."""

    project: str | None
    resolved_project_id: str | None
    warning: str | None


def resolve_project(project_id: object, viewer: str | None, agent_projects: dict[str, str]) -> ProjectScope:
    if project_id is UNSET or project_id is None:
        return ProjectScope(None, None, None)
    if not isinstance(project_id, str):
        raise InvalidInputError("'project_id' must be a string.", field="project_id")
    if project_id == AUTO_PROJECT and agent_projects:
        if not isinstance(viewer, str) or not viewer:  # a bad viewer fails in RecallFilters.build
            warning = ("No viewer was given, so '@auto' has no agent to resolve a default project for; "
                       "recalling from the global pool only (pass viewer=<your agent id>).")
            return ProjectScope("", "", warning)
        mapped = agent_projects.get(viewer)
        if mapped is None:
            warning = (f"Agent '{viewer}' has no default project in the operating context; "
                       "recalling from the global pool only.")
            return ProjectScope("", "", warning)
        return ProjectScope(mapped, mapped, None)
    if project_id != "":
        v.name(project_id, "project_id")
    return ProjectScope(project_id, project_id, None)


PREFIX_MIN_CHARS = 20  # shorter held strings ("Yes", "ok") identify a row only by equality


def normalize(text: str) -> str:
    """NFC, case-folded, whitespace-collapsed: the form exclude_contents compares."""
    return " ".join(unicodedata.normalize("NFC", text).split()).casefold()


def holds(held: str, content: str) -> bool:
    """True when a context entry ``held`` (normalized) stands for ``content`` (normalized): equal,
    or one a prefix of the other while the shorter has at least ``PREFIX_MIN_CHARS`` characters
    (a preview is a prefix of its row; the reply "Yes" is not the row "Yes, the kiln moved to
    Thursday")."""
    if held == content:
        return True
    if min(len(held), len(content)) < PREFIX_MIN_CHARS:
        return False
    return content.startswith(held) or held.startswith(content)


def prefixes(held: str, content: str) -> bool:
    """The rule for ``exclude_contents`` (docs/tools.md, ``recall``), strings the caller chose to send: one of the two
    (normalized) is a prefix of the other, whatever their length."""
    return content.startswith(held) or held.startswith(content)


@dataclass(frozen=True)
class RecallFilters(RowFilter):
    """A recall's filters: the row filters a graph backend evaluates inside its own queries
    (:class:`graph.api.RowFilter`: tenant, viewer, type, session, agent, channel, source prefix,
    project), and what only recall knows: the strings the caller holds, and whether corrected
    versions come too."""

    exclude: tuple[str, ...] = ()  # exclude_contents: prefix either way (docs/tools.md, ``recall``)
    held_context: tuple[str, ...] = ()  # recall_with_context's entries: see :func:`holds`
    include_superseded: bool = False  # also versions a newer one corrected (update_memory)
    as_of_us: int | None = None  # as_of: the rows valid at that instant, whatever their state now
    include_stale: bool = False  # rows a newer one contradicts rank as they would (recall/stale.py)
    include_quarantined: bool = False  # also rows quarantined by the poisoning policy (memory_core.write.poisoning)

    @classmethod
    def build(cls, tenant: str, viewer: object, scope: ProjectScope, **fields: Any) -> RecallFilters:
        type_ = fields.get("type")
        exclude = fields.get("exclude_contents") or ()
        if isinstance(exclude, str) or not all(isinstance(x, str) for x in exclude):
            raise InvalidInputError("'exclude_contents' must be a list of strings.", field="exclude_contents")
        held = fields.get("held_context") or ()
        source_id = fields.get("source_id")
        if source_id is not None and (not isinstance(source_id, str) or len(source_id) > MAX_SOURCE_ID):
            raise InvalidInputError(f"'source_id' must be a string of at most {MAX_SOURCE_ID} characters.",
                                    field="source_id")
        return cls(
            tenant=tenant,
            viewer=v.name(viewer, "viewer", required=False),
            type=v.memory_type(type_) if type_ else None,
            session=v.name(fields.get("session"), "session", required=False),
            agent=v.name(fields.get("agent"), "agent", required=False),
            channel=v.name(fields.get("channel"), "channel", required=False),
            source_prefix=source_id or None,
            project=scope.project,
            exclude=tuple(n for n in (normalize(x) for x in exclude) if n),
            held_context=tuple(n for n in (normalize(x) for x in held) if n),
            include_superseded=bool(fields.get("include_superseded")),
            as_of_us=v.instant_us(fields.get("as_of"), "as_of"),
            include_stale=bool(fields.get("include_stale")),
            include_quarantined=bool(fields.get("include_quarantined")),
        )

    def admits(self, a: MemoryNode) -> bool:
        """The authoritative predicate over an AGENT_MEMORY node."""
        if a.tenant != self.tenant:
            return False
        if a.visibility == "agent" and a.agent != self.viewer:
            return False
        if self.as_of_us is not None:
            if not a.valid_at(self.as_of_us):
                return False
        elif a.valid_to_us is not None and not self.include_superseded:
            return False
        if a.archived_us is not None:  # retention took it out of recall (memory_core.operator.retention)
            return False
        if a.flags and QUARANTINED in a.flags and not self.include_quarantined:
            return False
        if self.type and a.type != self.type:
            return False
        if self.session and a.session != self.session:
            return False
        if self.agent and a.agent != self.agent:
            return False
        if self.channel and a.channel != self.channel:
            return False
        if self.source_prefix and not (a.source_id or "").startswith(self.source_prefix):
            return False
        if self.project is not None:
            stored = a.project_id
            if self.project == "":
                return stored is None
            return stored is None or stored == self.project
        return True

    def admits_episode(self, a: EpisodeNode, has_channel: Callable[[str, str, str], bool] | None = None) -> bool:
        """Episodes summarize a whole session: no author, no per-user source, global pool.

        - ``agent`` set: skipped (an episode has no author).
        - a ``source_id`` prefix set: skipped, unless ``channel`` is set too, which scopes episodes to
          one conversation and re-admits them.
        - ``channel`` set: admitted only when the episode's session holds shared memories in
          that channel (``has_channel(tenant, session, channel)``, the graph store's
          ``session_has_channel``); without it, none is.
        """
        if a.tenant != self.tenant or self.agent:
            return False
        if self.as_of_us is not None and a.created_us > self.as_of_us:
            return False
        if self.source_prefix and not self.channel:
            return False
        if self.channel and (has_channel is None or not has_channel(self.tenant, a.session, self.channel)):
            return False
        if self.type and self.type != "episode":
            return False
        return not (self.session and a.session != self.session)

    @property
    def excludes(self) -> bool:
        """True when the caller holds strings that may exclude rows."""
        return bool(self.exclude or self.held_context)

    def excluded(self, content: str) -> bool:
        """Whether the caller already holds this row (see :func:`prefixes` and :func:`holds`)."""
        if not self.excludes:
            return False
        text = normalize(content)
        return any(prefixes(x, text) for x in self.exclude) or any(holds(x, text) for x in self.held_context)

    def chroma_where(self) -> dict[str, Any] | None:
        """Pushdown for Chroma, or None when no filter is selective.

        Each tenant has its own collection, so an unfiltered query cannot leave the tenant;
        a metadata filter costs Chroma a scan (≈ 260 ms at 100k rows here), so recall sends it
        only when neither an over-fetch nor the graph's id lists can serve the filter (see
        :mod:`memory_core.recall.branches.vector`). Visibility is then enforced on the graph node.
        """
        if not (self.type or self.session or self.agent or self.channel or self.project is not None):
            return None
        clauses: list[dict[str, Any]] = [{"tenant": self.tenant}]
        for key in ("type", "session", "agent"):
            value = getattr(self, key)
            if value:
                clauses.append({key: value})
        if self.channel:  # episode records carry no channel; admits_episode decides for them
            clauses.append({"$or": [{"channel": self.channel}, {"kind": "episode"}]})
        if self.project is not None:
            clauses.append({"project_id": {"$in": sorted({"", self.project})}})
        if self.viewer:
            clauses.append({"$or": [{"visibility": "tenant"}, {"agent": self.viewer}]})
        else:
            clauses.append({"visibility": "tenant"})
        return {"$and": clauses}
