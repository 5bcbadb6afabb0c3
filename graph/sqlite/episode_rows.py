"""The SQLite store's :class:`graph.api.EpisodeRows`: a tenant's episodes (session summaries)."""

from __future__ import annotations

from graph.api import EpisodeNode, EpisodeRows
from graph.sqlite.queries import SqliteQueries
from graph.sqlite.rows import EPISODE_SELECT, episode_from_row


class SqliteEpisodeRows(EpisodeRows):
    """Episodes by id, by session, or all of a tenant's (one per session)."""

    def __init__(self, q: SqliteQueries) -> None:
        self.q = q

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None:
        row = self.q.one(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = ? AND tenant = ?", (ep_id, tenant))
        return None if row is None else episode_from_row(row)

    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None:
        row = self.q.one(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = ? AND session = ?", (tenant, session))
        return None if row is None else episode_from_row(row)

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_from_row(r) for r in
                self.q.all(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = ? ORDER BY id", (tenant,))]
