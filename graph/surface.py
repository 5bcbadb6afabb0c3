"""The GraphStore surface of a backend's concerns, bound once for both backends.

A backend's store is its concerns composed: one object per narrow Protocol of :mod:`graph.api`
(memory rows, episodes, the timeline, counts, field, edge, entity and tenant indexes, lexical search,
the journal). Each method of the :class:`graph.api.GraphStore` surface is its concern's own method;
:meth:`ConcernSurface.bind_surface` binds them onto the store, so a method added to a concern's
Protocol is exposed on both backends by one line here.
"""

from __future__ import annotations

from graph.api import (
    Counts,
    EdgeIndex,
    EntityIndex,
    EpisodeRows,
    FieldIndex,
    Journal,
    LexicalSearch,
    MemoryRows,
    TenantIndex,
    Timeline,
)


class ConcernSurface:
    """A store made of concerns: it builds them, then calls :meth:`bind_surface` with them."""

    def bind_surface(self, rows: MemoryRows, eps: EpisodeRows, tl: Timeline, counts: Counts, fields: FieldIndex,
                     edges: EdgeIndex, ents: EntityIndex, tenants: TenantIndex, lexical: LexicalSearch,
                     journal: Journal) -> None:
        """Bind every read of the GraphStore surface to its concern's own method."""
        self.memory, self.memories, self.contents = rows.memory, rows.memories, rows.contents
        self.by_idempotency_key, self.memory_ids = rows.by_idempotency_key, rows.memory_ids
        self.review_due = rows.review_due
        self.episode, self.session_episode, self.episodes = eps.episode, eps.session_episode, eps.episodes
        self.page, self.iter_newest, self.adjacent = tl.page, tl.iter_newest, tl.adjacent
        self.adjacent_many, self.bounds = tl.adjacent_many, tl.bounds
        self.count, self.counts_by_day, self.sessions = counts.count, counts.counts_by_day, counts.sessions
        self.hidden_count, self.non_turn_count = counts.hidden_count, counts.non_turn_count
        self.private_count = counts.private_count
        self.field_ids, self.field_count, self.field_counts = fields.field_ids, fields.field_count, fields.field_counts
        self.source_prefix_ids, self.source_prefix_count = fields.source_prefix_ids, fields.source_prefix_count
        self.sessions_in_channel, self.session_has_channel = fields.sessions_in_channel, fields.session_has_channel
        self.edges_of, self.superseders, self.neighbourhood = edges.edges_of, edges.superseders, edges.neighbourhood
        self.entity, self.entity_names, self.entity_by_name = ents.entity, ents.entity_names, ents.entity_by_name
        self.entity_ids, self.entities, self.entity_mentions = ents.entity_ids, ents.entities, ents.entity_mentions
        self.entity_mention_counts, self.memory_entities = ents.entity_mention_counts, ents.memory_entities
        self.entity_relations, self.entity_records = ents.entity_relations, ents.entity_records
        self.alias_views, self.all_mentions, self.all_relations = (ents.alias_views, ents.all_mentions,
                                                                   ents.all_relations)
        self.tenants, self.agents, self.agent_names = tenants.tenants, tenants.agents, tenants.agent_names
        self.lexical_window, self.lexical_windows = lexical.lexical_window, lexical.lexical_windows
        self.lexical_phrases = lexical.lexical_phrases
        self.journal, self.claim_journal, self.journal_size = (journal.journal, journal.claim_journal,
                                                               journal.journal_size)
