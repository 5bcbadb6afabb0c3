"""`memory-core token`: one command makes agent tokens (tenant, optionally one agent, a scope) and the
operator token."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from memory_core.scopes import Scope
from memory_core.settings import load_settings
from memory_core.settings.schema import TokenBinding
from tools.auth import TokenTenantVerifier, hash_token
from tools.cli.app import app

runner = CliRunner()


def made(*args: str) -> dict[str, str]:
    result = runner.invoke(app, ["token", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.mark.anyio
@pytest.mark.parametrize(("args", "binding"), [
    (["acme"], TokenBinding(tenant="acme")),
    (["acme", "--agent", "alice"], TokenBinding(tenant="acme", agent="alice")),
    (["acme", "--scope", "read"], TokenBinding(tenant="acme", scope=Scope.READ)),
    (["acme", "--agent", "ops", "--scope", "admin"], TokenBinding(tenant="acme", agent="ops", scope=Scope.ADMIN)),
])  # fmt: skip
async def test_an_agent_token_and_its_config_line_bind_what_was_asked(
    args: list[str], binding: TokenBinding
) -> None:
    out = made(*args)
    assert out["token_sha256"] == hash_token(out["token"]) and len(out["token"]) >= 40
    table = tomllib.loads("[server.tokens]\n" + out["config_line"] + "\n")
    settings = load_settings(environ={}, overrides=table)
    assert settings.server.tokens == {out["token_sha256"]: binding}
    verified = await TokenTenantVerifier(settings.server.tokens).verify_token(out["token"])
    expected = {"tenant": "acme", "scope": binding.scope.value}
    if binding.agent is not None:
        expected["agent"] = binding.agent
    assert verified is not None and verified.claims == expected
    assert out["scope"] == binding.scope.value and f'scope = "{binding.scope}"' in out["config_line"]


@pytest.mark.anyio
async def test_a_token_entry_written_before_scopes_keeps_working_as_write() -> None:
    digest = hash_token("old-token")
    for entry in ('"acme"', '{ tenant = "acme", agent = "alice" }'):
        settings = load_settings(environ={}, overrides=tomllib.loads(f'[server.tokens]\n"{digest}" = {entry}\n'))
        verified = await TokenTenantVerifier(settings.server.tokens).verify_token("old-token")
        assert verified is not None and verified.claims is not None and verified.claims["scope"] == "write"


def test_a_token_entry_with_an_unknown_scope_fails_at_start_naming_the_key() -> None:
    from memory_core.errors import ConfigError

    table = tomllib.loads(f'[server.tokens]\n"{hash_token("t")}" = {{ tenant = "acme", scope = "root" }}\n')
    with pytest.raises(ConfigError) as raised:
        load_settings(environ={}, overrides=table)
    assert "server.tokens" in raised.value.message


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
def test_every_token_is_new() -> None:
    assert made("acme")["token"] != made("acme")["token"]


def test_the_human_output_shows_the_token_once_and_where_the_line_goes() -> None:
    result = runner.invoke(app, ["token", "acme", "--agent", "alice"])
    assert result.exit_code == 0
    assert "shown once" in result.output and "[server.tokens]" in result.output
    assert "agent = \"alice\"" in result.output and "Authorization: Bearer" in result.output


@pytest.mark.parametrize("args", [
    ["has space"], ["-leading-dash-is-an-option"], ["x" * 129], ["acme", "--agent", "two words"],
    ["acme", "--operator"], ["--operator", "--agent", "alice"], [], ["acme", "--scope", "root"],
    ["acme", "--scope", "READ"], ["--operator", "--scope", "admin"], ["acme", "--metrics"],
    ["--metrics", "--operator"], ["--metrics", "--agent", "alice"], ["--metrics", "--scope", "read"],
])  # fmt: skip
def test_a_tenant_agent_or_scope_that_does_not_match_its_pattern_is_refused(args: list[str]) -> None:
    result = runner.invoke(app, ["token", *args, "--json"])
    assert result.exit_code == 2
    if result.output.startswith("{"):
        assert json.loads(result.output)["error"]["code"] == "INVALID_INPUT"


def test_the_metrics_token_goes_under_metrics_and_is_read_by_the_settings() -> None:
    out = made("--metrics")
    assert out["section"] == "metrics" and out["token_sha256"] == hash_token(out["token"])
    config = tomllib.loads(f"[metrics]\nenabled = true\n{out['config_line']}\n")
    settings = load_settings(environ={}, overrides=config)
    assert settings.metrics.token_sha256 == out["token_sha256"]
