"""`memory-core token`: one command makes agent tokens (tenant, optionally one agent) and the operator token."""

from __future__ import annotations

import json
import tomllib

import pytest
from typer.testing import CliRunner

from memory_core.settings.schema import TokenBinding, load_settings
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
    expected = {"tenant": "acme"} if binding.agent is None else {"tenant": "acme", "agent": binding.agent}
    assert verified is not None and verified.claims == expected


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_every_token_is_new() -> None:
    assert made("acme")["token"] != made("acme")["token"]


def test_the_human_output_shows_the_token_once_and_where_the_line_goes() -> None:
    result = runner.invoke(app, ["token", "acme", "--agent", "alice"])
    assert result.exit_code == 0
    assert "shown once" in result.output and "[server.tokens]" in result.output
    assert "agent = \"alice\"" in result.output and "Authorization: Bearer" in result.output


@pytest.mark.parametrize("args", [
    ["has space"], ["-leading-dash-is-an-option"], ["x" * 129], ["acme", "--agent", "two words"],
    ["acme", "--operator"], ["--operator", "--agent", "alice"], [],
])  # fmt: skip
def test_a_tenant_or_agent_that_does_not_match_its_pattern_is_refused(args: list[str]) -> None:
    result = runner.invoke(app, ["token", *args, "--json"])
    assert result.exit_code == 2
    if result.output.startswith("{"):
        assert json.loads(result.output)["error"]["code"] == "INVALID_INPUT"
