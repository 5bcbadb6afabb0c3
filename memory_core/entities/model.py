"""Entities and relations from the configured model provider (litellm), for the background worker.

The model is asked for JSON ``{"entities": [{name, kind}], "relations": [{from, to, label}]}``;
its answer passes the same validation as a writer's declaration (:mod:`memory_core.entities.declared`),
item by item: a malformed item is dropped, never the add. Failures are
:class:`memory_core.sessions.summary.SummaryProviderError` with the summary provider's stable reasons;
transient ones are retried (tenacity, bounded by ``total_timeout_s``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_before_delay, wait_exponential_jitter

from graph.api import EntitySpec, RelationSpec
from memory_core.entities import declared
from memory_core.errors import InvalidInputError
from memory_core.sessions.summary.errors import (
    LITELLM_UNAVAILABLE,
    MALFORMED_RESPONSE,
    SummaryProviderError,
    classify_exception,
    provider_exception_types,
)
from memory_core.sessions.summary.provider import load_litellm
from memory_core.settings.schema import ModelProviderSettings

MAX_INPUT_CHARS = 4000
_DUMMY_API_KEY = "sk-no-key-required"
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
    """Anything that names the entities of a text (raises SummaryProviderError, or anything: fail-soft)."""

    def extract(self, text: str) -> ModelEntities: ...


def parse_answer(text: str) -> ModelEntities:
    """The model's JSON as specs; invalid items are dropped one by one, a non-object is MALFORMED."""
    start, end = text.find("{"), text.rfind("}")
    try:
        data = json.loads(text[start:end + 1]) if start >= 0 and end > start else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise SummaryProviderError(MALFORMED_RESPONSE, transient=False)
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
    """Ask ``model_provider`` through ``litellm.completion``; transient failures retried."""

    def __init__(self, settings: ModelProviderSettings, *, backoff_initial_s: float = 0.1,
                 backoff_max_s: float = 1.0) -> None:
        self.settings = settings
        self._wait = wait_exponential_jitter(multiplier=backoff_initial_s, max=backoff_max_s, jitter=0.1)

    def extract(self, text: str) -> ModelEntities:
        s = self.settings
        messages = [{"role": "system", "content": _PROMPT}, {"role": "user", "content": text[:MAX_INPUT_CHARS]}]
        started = time.monotonic()

        def attempt() -> ModelEntities:
            remaining = s.total_timeout_s - (time.monotonic() - started)
            return parse_answer(self._complete(messages, max(0.05, min(s.timeout_s, remaining))))

        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, SummaryProviderError) and exc.transient),
            stop=stop_after_attempt(s.max_retries + 1) | stop_before_delay(s.total_timeout_s),
            wait=self._wait, reraise=True,
        )
        return retrying(attempt)

    def _complete(self, messages: Sequence[dict[str, str]], timeout_s: float) -> str:
        s = self.settings
        try:
            litellm = load_litellm()
        except ImportError as exc:
            raise SummaryProviderError(LITELLM_UNAVAILABLE, transient=False) from exc
        api_key = (os.environ.get(s.api_key_env) if s.api_key_env else None) or _DUMMY_API_KEY
        try:
            response = litellm.completion(model=s.model, api_base=s.api_base, api_key=api_key, messages=list(messages),
                                          timeout=timeout_s, max_tokens=600, num_retries=0)
        except provider_exception_types() as exc:
            raise classify_exception(exc, timeout_s=timeout_s) from exc
        try:
            content = response.choices[0].message.content
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise SummaryProviderError(MALFORMED_RESPONSE, transient=False) from exc
        if not isinstance(content, str):
            raise SummaryProviderError(MALFORMED_RESPONSE, transient=False)
        return content
