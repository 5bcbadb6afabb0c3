"""The model provider (litellm): one client for completions and embeddings, and its coded failures.

Summaries (:mod:`memory_core.sessions.summary`), entity extraction (:mod:`memory_core.entities.model`)
and remote embeddings (:mod:`memory_core.embedding.remote`) all reach the provider through
:class:`~memory_core.provider.client.ModelClient`: one place that imports litellm offline, applies
timeouts and retries transient failures, and classifies what went wrong into stable reasons.
"""
