"""miniSummary through litellm against a real local HTTP server, and its fail-soft fallback.

Every provider case goes through litellm → openai SDK → httpx → a socket, because timeouts,
status mapping and retry counts are exactly what a mock would get wrong. Each asserts the
outcome's source and reason and how many requests the server saw.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from memory_core.sessions.summary import SummaryOutcome, SummaryTurn, extractive_summary, summarize_with_fallback
from memory_core.sessions.summary.provider import LiteLLMSummaryProvider
from memory_core.sessions.summary.text import ELLIPSIS
from memory_core.settings.schema import ModelProviderSettings
from testbed.paths import ROOT
from tests.support.fake_llm import (
    FakeLLM,
    empty,
    fake_llm,
    long_text,
    malformed,
    no_choices,
    ok,
    slow,
    status,
)

KEY_ENV = "MEMORY_CORE_TEST_SUMMARY_KEY"
T0 = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)

TURNS = [
    SummaryTurn("alice", "user", "Can you look at the flaky cache test? It fails on CI.", T0, "turn"),
    SummaryTurn("bot", "assistant", "Found it: the TTL check used wall-clock time. I will switch it to "
                "a monotonic clock.", T0 + timedelta(minutes=1), "turn"),
    SummaryTurn("alice", "user", "Ok. We decided to keep the old API. Next step is to rerun CI.",
                T0 + timedelta(minutes=2), "turn"),
]
HANDOFF = "Working on cache reliability for release 2.1. Tests were green before the refactor."


# Every DNS lookup and connect made while this module runs, seen by an audit hook (hooks cannot be
# removed, so it only records while the flag is up). Installed before litellm's first import.
NETWORK_EVENTS: list[tuple[str, str]] = []
_RECORDING = {"on": False, "litellm_was_preloaded": "litellm" in sys.modules}


def _audit(event: str, args: tuple[object, ...]) -> None:
    if not _RECORDING["on"]:
        return
    if event == "socket.getaddrinfo":
        NETWORK_EVENTS.append(("dns", str(args[0])))
    elif event == "socket.connect" and isinstance(args[1], tuple):
        NETWORK_EVENTS.append(("connect", str(args[1][0])))


@pytest.fixture(scope="module", autouse=True)
def warm_litellm() -> Iterator[None]:
    """Pay litellm's import and first-call set-up (~7 s) once, outside the timed assertions."""
    _RECORDING["litellm_was_preloaded"] = "litellm" in sys.modules
    sys.addaudithook(_audit)
    _RECORDING["on"] = True
    with fake_llm() as server:
        assert run(settings_for(server)).source == "model"
    yield
    _RECORDING["on"] = False


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with fake_llm() as server:
        yield server


def settings_for(fake: FakeLLM, **overrides: object) -> ModelProviderSettings:
    base: dict[str, object] = {
        "enabled": True, "model": "openai/gpt-4o-mini", "api_base": fake.api_base,
        "api_key_env": KEY_ENV, "timeout_s": 2.0, "max_retries": 2, "total_timeout_s": 10.0,
    }
    return ModelProviderSettings(**{**base, **overrides})  # type: ignore[arg-type]


def run(settings: ModelProviderSettings, provider_enabled: bool = True) -> SummaryOutcome:
    # Tiny back-off so retry tests take milliseconds, not seconds.
    provider = LiteLLMSummaryProvider(
        settings, backoff_initial_s=0.01, backoff_max_s=0.05, backoff_jitter_s=0.01
    ) if provider_enabled else None
    return summarize_with_fallback(provider, settings, TURNS, HANDOFF)


def assert_fallback(outcome: SummaryOutcome, reason: str) -> None:
    assert outcome.source == "fallback"
    assert outcome.error == reason
    assert outcome.text == extractive_summary(TURNS, HANDOFF, 280)


def test_a_good_model_answer_becomes_the_summary(fake: FakeLLM, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-123")
    fake.enqueue(ok("Fixing the flaky cache TTL test; next: rerun CI."))
    outcome = run(settings_for(fake))
    assert outcome == SummaryOutcome("Fixing the flaky cache TTL test; next: rerun CI.", "model", None)
    assert fake.request_count == 1
    request = fake.requests[0]
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test-123"  # key read from the named env var
    assert request.body["model"] == "gpt-4o-mini"
    assert "monotonic clock" in request.body["messages"][-1]["content"]
    assert "release 2.1" in request.body["messages"][-1]["content"]


def test_a_server_that_is_down_falls_back_with_connection_refused(fake: FakeLLM) -> None:
    with fake_llm() as gone:
        dead_base = gone.api_base
    started = time.monotonic()
    outcome = run(settings_for(fake, api_base=dead_base))
    assert_fallback(outcome, "connection refused")
    assert gone.request_count == 0 and fake.request_count == 0
    assert time.monotonic() - started < 3.0  # refused is immediate; only the small back-offs add up


@pytest.mark.slow
def test_a_server_slower_than_timeout_falls_back_after_the_retries(fake: FakeLLM) -> None:
    fake.default = slow(3.0)
    started = time.monotonic()
    outcome = run(settings_for(fake, timeout_s=0.5, max_retries=1))
    assert_fallback(outcome, "timeout after 0.5s")
    assert fake.request_count == 2  # timeouts are transient: one retry
    assert time.monotonic() - started < 2.5


@pytest.mark.slow
def test_the_total_time_budget_ends_retries_before_the_attempt_limit(fake: FakeLLM) -> None:
    fake.default = slow(3.0)
    started = time.monotonic()
    outcome = run(settings_for(fake, timeout_s=0.4, max_retries=10, total_timeout_s=1.0))
    assert outcome.source == "fallback" and (outcome.error or "").startswith("timeout after")
    assert 2 <= fake.request_count <= 4
    assert time.monotonic() - started < 1.6  # the last attempt's timeout shrinks to the budget left


def test_two_503s_then_success_uses_the_retries(fake: FakeLLM) -> None:
    fake.enqueue(status(503), status(503), ok("Recovered summary."))
    outcome = run(settings_for(fake))
    assert outcome == SummaryOutcome("Recovered summary.", "model", None)
    assert fake.request_count == 3


def test_a_429_is_retried_like_a_5xx(fake: FakeLLM) -> None:
    fake.enqueue(status(429), ok("After the rate limit."))
    assert run(settings_for(fake)).source == "model"
    assert fake.request_count == 2


def test_a_persistent_503_stops_after_max_retries(fake: FakeLLM) -> None:
    fake.default = status(503)
    assert_fallback(run(settings_for(fake, max_retries=2)), "http 503")
    assert fake.request_count == 3


def test_a_400_is_not_retried(fake: FakeLLM) -> None:
    fake.default = status(400)
    assert_fallback(run(settings_for(fake)), "http 400")
    assert fake.request_count == 1


def test_malformed_json_falls_back_without_retry(fake: FakeLLM) -> None:
    fake.default = malformed()
    assert_fallback(run(settings_for(fake)), "malformed response")
    assert fake.request_count == 1


def test_a_response_without_choices_is_malformed(fake: FakeLLM) -> None:
    fake.default = no_choices()
    assert_fallback(run(settings_for(fake)), "malformed response")
    assert fake.request_count == 1


def test_blank_model_text_is_junk_and_falls_back(fake: FakeLLM) -> None:
    fake.default = empty()
    assert_fallback(run(settings_for(fake)), "empty response")
    assert fake.request_count == 1


def test_a_summary_longer_than_the_cap_is_trimmed_at_a_word_boundary(fake: FakeLLM) -> None:
    behaviour = long_text(1000)
    fake.enqueue(behaviour)
    outcome = run(settings_for(fake, max_summary_chars=280))
    assert outcome.source == "model" and outcome.error is None
    assert len(outcome.text) <= 280 and outcome.text.endswith(ELLIPSIS)
    kept = outcome.text.removesuffix(ELLIPSIS)
    assert behaviour.text.startswith(kept) and behaviour.text[len(kept)] == " "
    assert fake.request_count == 1


@pytest.mark.parametrize("provider_enabled", [True, False], ids=["disabled-in-config", "no-provider"])
def test_a_disabled_or_absent_provider_falls_back_without_any_request(
    fake: FakeLLM, provider_enabled: bool
) -> None:
    settings = settings_for(fake, enabled=not provider_enabled)
    assert_fallback(run(settings, provider_enabled=provider_enabled), "provider disabled")
    assert fake.request_count == 0


def test_a_plugin_provider_that_raises_anything_still_falls_back() -> None:
    class Broken:
        def summarize(self, turns: object, *, previous_handoff: str | None) -> str:
            raise KeyError("boom")

    outcome = summarize_with_fallback(Broken(), ModelProviderSettings(enabled=True), TURNS, HANDOFF)
    assert_fallback(outcome, "provider error (KeyError)")


def test_no_turns_means_no_model_call(fake: FakeLLM) -> None:
    provider = LiteLLMSummaryProvider(settings_for(fake))
    outcome = summarize_with_fallback(provider, settings_for(fake), [], None)
    assert outcome == SummaryOutcome("", "fallback", "no turns")
    assert fake.request_count == 0


def test_the_extractive_summary_is_deterministic_capped_and_leads_with_the_handoff() -> None:
    text = extractive_summary(TURNS, HANDOFF, 280)
    assert text == extractive_summary(list(TURNS), HANDOFF, 280)
    assert len(text) <= 280
    assert text.startswith("Working on cache reliability for release 2.1.")
    assert "decided to keep the old API" in text
    for cap in (1, 5, 20, 60, 120):
        short = extractive_summary(TURNS, HANDOFF, cap)
        assert 0 < len(short) <= cap


def test_the_extractive_summary_is_never_empty_with_at_least_one_turn() -> None:
    for content in ("ok", "   ", "x" * 5000, "Short. Tiny. Ok!"):
        turn = SummaryTurn("bob", "user", content, None, "turn")
        assert 0 < len(extractive_summary([turn], None, 280)) <= 280
    assert extractive_summary([], None) == ""


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in [n for n in env if n.startswith("LITELLM_")]:
        del env[name]  # prove the module sets offline mode itself
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_importing_the_package_does_not_import_litellm() -> None:
    result = _run_python("""
        import sys
        import memory_core, memory_core.sessions.summary, memory_core.sessions.summary.provider
        assert "litellm" not in sys.modules, "litellm imported eagerly"
        assert "openai" not in sys.modules, "openai imported eagerly"
    """)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow
def test_litellm_is_loaded_offline_and_only_talks_to_the_configured_server() -> None:
    if not _RECORDING["litellm_was_preloaded"]:
        # The audit hook was in place before `import litellm` in this process: check what it saw.
        foreign = [e for e in NETWORK_EVENTS if e[1] not in ("127.0.0.1", "localhost")]
        assert not foreign, foreign
        assert ("connect", "127.0.0.1") in NETWORK_EVENTS  # the hook did observe the real calls
        assert os.environ["LITELLM_OFFLINE_MODE"] == "true"
        return
    # Another test module imported litellm first; repeat the check in a fresh interpreter.
    result = _run_python("""
        import os, sys
        seen = []
        def hook(event, args):
            if event == "socket.getaddrinfo":
                seen.append(("dns", str(args[0])))
            elif event == "socket.connect" and isinstance(args[1], tuple):
                seen.append(("connect", str(args[1][0])))
        sys.addaudithook(hook)
        from memory_core.sessions.summary import SummaryTurn, summarize_with_fallback
        from memory_core.settings.schema import ModelProviderSettings
        from memory_core.sessions.summary.provider import LiteLLMSummaryProvider
        from tests.support.fake_llm import fake_llm, ok
        with fake_llm(ok("Offline fine.")) as fake:
            s = ModelProviderSettings(enabled=True, api_base=fake.api_base)
            turns = [SummaryTurn("a", "user", "hello there, general", None, "turn")]
            out = summarize_with_fallback(LiteLLMSummaryProvider(s), s, turns, None)
        assert out.source == "model", out
        assert os.environ["LITELLM_OFFLINE_MODE"] == "true"
        foreign = [s for s in seen if s[1] not in ("127.0.0.1", "localhost")]
        assert not foreign, foreign
    """)
    assert result.returncode == 0, result.stderr[-3000:]
