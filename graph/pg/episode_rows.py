"""The PostgreSQL store's :class:`graph.api.EpisodeRows`: a tenant's episodes (session summaries)."""

from __future__ import annotations

from graph.api import EpisodeNode, EpisodeRows
from graph.pg.queries import PgQueries
from graph.pg.rows import EPISODE_SELECT, episode_node


class PgEpisodeRows(EpisodeRows):
    """Episodes by id, by session, or all of a tenant's (one per session)."""

    def __init__(self, q: PgQueries) -> None:
        self.q = q

    def episode(self, tenant: str, ep_id: int) -> EpisodeNode | None:
        rows = self.q.rows(f"SELECT {EPISODE_SELECT} FROM episodes WHERE id = %s AND tenant = %s", [ep_id, tenant])
        return episode_node(rows[0]) if rows else None

    def session_episode(self, tenant: str, session: str) -> EpisodeNode | None:
        rows = self.q.rows(f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s AND session = %s",
                           [tenant, session])
        return episode_node(rows[0]) if rows else None

    def episodes(self, tenant: str) -> list[EpisodeNode]:
        return [episode_node(r) for r in self.q.rows(
            f"SELECT {EPISODE_SELECT} FROM episodes WHERE tenant = %s ORDER BY id", [tenant])]
