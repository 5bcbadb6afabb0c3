"""embedding.provider = "litellm": vectors from a provider over HTTP (a real local
OpenAI-compatible server that litellm talks to), failing cleanly when it is down."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import MemoryCore, MemoryCoreError
from memory_core.embedding.local import HashEmbedder
from memory_core.errors import ConfigError
from memory_core.settings import load_settings
from tests.support.fake_llm import EMBEDDING_DIM, FakeLLM, fake_llm, status


@pytest.fixture(scope="module")
def provider() -> Iterator[FakeLLM]:
    with fake_llm() as server:
        yield server


def open_remote(data_dir: Path, api_base: str) -> MemoryCore:
    settings = load_settings(environ={}, overrides={"embedding": {
        "provider": "litellm", "model": "openai/fake-embedder", "api_base": api_base, "dimension": EMBEDDING_DIM,
    }})
    return MemoryCore.open(data_dir, settings=settings)


@pytest.mark.slow
def test_memories_are_embedded_by_the_provider_and_recalled(provider: FakeLLM, tmp_path: Path) -> None:
    before = provider.request_count
    with open_remote(tmp_path / "d", provider.api_base) as core:
        core.add_memories([{"tenant": "acme", "session": "s", "agent": "a", "content": text} for text in (
            "The billing worker retries invoices three times.", "Lunch is at noon on Fridays.")])
        hits = core.recall("acme", "how often does the billing worker retry invoices", limit=1)
        assert hits.messages[0].content.startswith("The billing worker")
        assert hits.messages[0].match_reason and "cosine" in hits.messages[0].match_reason
    assert provider.request_count - before == 2  # one batch for the adds, one for the query


@pytest.mark.slow
def test_a_transient_provider_failure_is_retried(provider: FakeLLM, tmp_path: Path) -> None:
    with open_remote(tmp_path / "d", provider.api_base) as core:
        before = provider.request_count
        provider.enqueue(status(503))
        core.add_memory("acme", "s", "a", "retried once")
        assert provider.request_count - before == 2


@pytest.mark.slow
def test_a_provider_that_is_down_fails_the_add_and_writes_nothing(tmp_path: Path) -> None:
    with open_remote(tmp_path / "d", "http://127.0.0.1:9") as core:
        with pytest.raises(MemoryCoreError) as err:
            core.add_memory("acme", "s", "a", "never stored")
        assert err.value.code == "EMBEDDING_UNAVAILABLE"
        assert core._graph.count("acme") == 0 and core._vectors.count("acme") == 0


@pytest.mark.slow
def test_a_reply_of_the_wrong_dimension_is_refused(provider: FakeLLM, tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {
        "provider": "litellm", "model": "openai/fake-embedder", "api_base": provider.api_base, "dimension": 16}})
    with MemoryCore.open(tmp_path / "d", settings=settings) as core, pytest.raises(MemoryCoreError) as err:
        core.add_memory("acme", "s", "a", "wrong size")
    assert err.value.code == "EMBEDDING_UNAVAILABLE" and "dimension" in err.value.message


def test_a_store_refuses_to_open_with_a_different_embedder(provider: FakeLLM, tmp_path: Path) -> None:
    with open_remote(tmp_path / "d", provider.api_base) as core:
        core.add_memory("acme", "s", "a", "embedded remotely")
    with pytest.raises(MemoryCoreError) as err:
        MemoryCore.open(tmp_path / "d", settings=load_settings(environ={}), embedder=HashEmbedder())
    # EMBEDDER_MISMATCH, a CONFIG_INVALID of its own (CLI exit 5), naming both models
    assert err.value.code == "EMBEDDER_MISMATCH" and isinstance(err.value, ConfigError)
    assert "litellm:openai/fake-embedder" in err.value.message
    with open_remote(tmp_path / "d", provider.api_base) as core:  # the original settings still open it
        assert core._graph.count("acme") == 1


def test_litellm_provider_without_a_model_fails_at_start(tmp_path: Path) -> None:
    settings = load_settings(environ={}, overrides={"embedding": {"provider": "litellm"}})
    with pytest.raises(MemoryCoreError) as err:
        MemoryCore.open(tmp_path / "d", settings=settings)
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "embedding.model"
