"""Entities and relations from the configured model provider (litellm), for the background worker.

The model is asked for JSON ``{"entities": [{name, kind}], "relations": [{from, to, label}]}``;
its answer passes the same validation as a writer's declaration (:mod:`memory_core.entities.declared`),
item by item: a malformed item is dropped, never the add. Failures are
:class:`memory_core.provider.errors.ProviderError` with the model provider's stable reasons;
transient ones are retried by the client (bounded by ``total_timeout_s``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Protocol

from graph.api import EntitySpec, RelationSpec
from memory_core.entities import declared
from memory_core.errors import InvalidInputError
from memory_core.provider.client import ModelClient, endpoint
from memory_core.provider.errors import MALFORMED_RESPONSE, ProviderError
from memory_core.settings.schema import ModelProviderSettings

MAX_INPUT_CHARS = 4000
_PROMPT = (
    "List the named things this note from an AI agent's project memory is about: people, teams, services, "
    "projects, files, tools, errors, places. Answer with JSON only: {\"entities\": [{\"name\": ..., \"kind\": "
    "one lower-case word}], \"relations\": [{\"from\": name, \"to\": name, \"label\": a short verb phrase}]}. "
    f"At most {declared.MAX_ENTITIES} entities; relations only between listed entities; no prose."
)


@dataclass(frozen=True, slots=True)
class ModelEntities:
    entities: list[EntitySpec]
    relations: list[RelationSpec]


class EntityModel(Protocol):
    """Anything that names the entities of a text (raises ProviderError, or anything: fail-soft)."""

    def extract(self, text: str) -> ModelEntities: ...


def parse_answer(text: str) -> ModelEntities:
    """The model's JSON as specs; invalid items are dropped one by one, a non-object is MALFORMED."""
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start:end + 1]) if start >= 0 and end > start else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ProviderError(MALFORMED_RESPONSE, transient=False)
    entities: list[EntitySpec] = []
    for item in _items(data.get("entities"))[:declared.MAX_ENTITIES]:
        entities += _valid(lambda i=item: declared.entities([{k: i.get(k) for k in ("name", "kind") if k in i}]))
    relations: list[RelationSpec] = []
    for item in _items(data.get("relations"))[:declared.MAX_RELATIONS]:
        relations += _valid(lambda i=item: declared.relations(
            [{k: i.get(k) for k in ("from", "to", "label")}], entities))
    return ModelEntities(entities, relations)


def _items(value: object) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _valid(parse: Any) -> list[Any]:
    try:
        return list(parse())
    except InvalidInputError:
        return []  # a model's bad item (a kind like "Person Name", a relation to nothing) is dropped


class LiteLLMEntityModel:
    """Ask ``model_provider`` through the model client; transient failures retried."""

    def __init__(self, settings: ModelProviderSettings, *, backoff_initial_s: float = 0.1,
                 backoff_max_s: float = 1.0) -> None:
        self.settings = settings
        self.client = ModelClient(endpoint(settings), backoff_initial_s=backoff_initial_s, backoff_max_s=backoff_max_s)

    def extract(self, text: str) -> ModelEntities:
        messages = [{"role": "system", "content": _PROMPT}, {"role": "user", "content": text[:MAX_INPUT_CHARS]}]
        return self.client.complete(messages, max_tokens=600, parse=_parse_content)


def _parse_content(content: Any) -> ModelEntities:
    if not isinstance(content, str):
        raise ProviderError(MALFORMED_RESPONSE, transient=False)
    return parse_answer(content)
