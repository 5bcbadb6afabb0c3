"""Entities from the configured model provider, on a background worker: a real OpenAI-compatible
server on 127.0.0.1 that litellm talks to. Adds never wait for it and never fail because of it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore
from memory_core.entities.model import parse_answer
from memory_core.provider.errors import ProviderError
from tests.support.backends import open_core
from tests.support.fake_llm import FakeLLM, fake_llm, malformed, ok, slow, status

ANSWER = json.dumps({"entities": [{"name": "Zeta Corp", "kind": "org"}, {"name": "Priya", "kind": "person"},
                                  {"name": "", "kind": "junk"}, {"name": "X", "kind": "Not A Kind"}],
                     "relations": [{"from": "Priya", "to": "Zeta Corp", "label": "works at"},
                                   {"from": "Priya", "to": "Nobody", "label": "knows"}]})


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    with fake_llm() as server:
        yield server


@pytest.fixture
def core(llm: FakeLLM, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[MemoryCore]:
    llm.script.clear()
    llm.default = ok(ANSWER)
    c = open_core("memory", tmp_path / "d", request, model_provider={
        "enabled": True, "extract_entities": True, "model": "openai/test-model", "api_base": llm.api_base,
        "timeout_s": 1.0, "max_retries": 1, "total_timeout_s": 3.0})
    yield c
    c.close()


def _names(core: MemoryCore) -> dict[str, str | None]:
    return {e.name: e.kind for e in core.list_entities("acme")}


def test_the_model_s_entities_and_relations_are_linked_after_the_add(core: MemoryCore, llm: FakeLLM) -> None:
    ref = core.add_memory("acme", "s1", "ann", "she joined the company last week").ref
    assert core._entity_worker is not None and core._entity_worker.drain(120)
    assert _names(core) == {"Zeta Corp": "org", "Priya": "person"}  # the invalid items were dropped
    priya = core._graph.entity_by_name("acme", "priya", None)
    assert priya is not None and core._graph.entity_mentions("acme", [priya.id], None) == {priya.id: [int(ref[4:])]}
    assert [r.label for r in core._graph.entity_relations("acme", [priya.id], None)] == ["works at"]
    assert "she joined the company" in json.dumps(llm.requests[-1].body)


@pytest.mark.slow
@pytest.mark.parametrize("behaviour", [status(500), status(400), malformed(), ok("no json here"), slow(2.5)])
def test_a_failing_or_slow_model_never_fails_or_slows_an_add(core: MemoryCore, llm: FakeLLM, behaviour: object) -> None:
    llm.default = behaviour  # type: ignore[assignment]
    started = time.monotonic()
    refs = [core.add_memory("acme", "s1", "ann", f"note {i}", entities=[{"name": "Declared"}]).ref for i in range(3)]
    assert time.monotonic() - started < 2.0 and len(set(refs)) == 3
    assert core._entity_worker is not None and core._entity_worker.drain(120)
    assert _names(core) == {"Declared": None}
    assert core._entity_worker.stats.failed == 3 and core._entity_worker.stats.linked == 0


@pytest.mark.slow
def test_a_memory_deleted_before_the_model_answers_links_nothing(core: MemoryCore, llm: FakeLLM) -> None:
    llm.default = slow(0.5, ANSWER)
    ref = core.add_memory("acme", "s1", "ann", "a note").ref
    assert core.delete_memory("acme", ref)
    assert core._entity_worker is not None and core._entity_worker.drain(120)
    assert core._graph.entity_records("acme") == []


def test_without_extract_entities_no_model_call_is_made(llm: FakeLLM, tmp_path: Path,
                                                        request: pytest.FixtureRequest) -> None:
    c = open_core("memory", tmp_path / "d", request, model_provider={
        "enabled": True, "model": "openai/test-model", "api_base": llm.api_base})
    try:
        before = llm.request_count
        c.add_memory("acme", "s1", "ann", "a note")
        assert c._entity_worker is None and llm.request_count == before
    finally:
        c.close()


def test_an_answer_that_is_not_a_json_object_is_a_malformed_response() -> None:
    with pytest.raises(ProviderError) as err:
        parse_answer("[1, 2]")
    assert err.value.reason == "malformed response"
    assert parse_answer('Sure! {"entities": [{"name": "Ada"}]}').entities[0].name == "Ada"
