"""Binding an agent to a connection: the config format, MEMORY_CORE_AGENT, and the scope rules.

The rules themselves run over the real MCP transports in test_mcp_agent_binding.py; these
are the fast checks of parsing and resolution.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

from memory_core.errors import AgentMismatchError, ConfigError
from memory_core.scopes import Scope
from memory_core.settings import load_settings
from memory_core.settings.schema import TokenBinding
from testbed.mcp_harness import ROOT, SERVER_COMMAND, server_env
from tools.auth import TenantScope, TokenTenantVerifier, check_token_hashes, hash_token
from tools.cli.common import EXIT_CONFIG


def test_a_token_entry_is_a_tenant_or_a_tenant_with_one_agent(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[server.tokens]\n"aa" = "acme"\n"bb" = { tenant = "acme", agent = "alice" }\n')
    tokens = load_settings(cfg, environ={}).server.tokens
    assert tokens == {"aa": TokenBinding(tenant="acme"), "bb": TokenBinding(tenant="acme", agent="alice")}


@pytest.mark.parametrize(("entry", "key"), [
    ('{ tenant = "acme", agent = "has space" }', "server.tokens.bb.agent"),
    ('{ tenant = "acme", agnet = "alice" }', "server.tokens.bb.agnet"),
    ('{ agent = "alice" }', "server.tokens.bb.tenant"),
    ("5", "server.tokens.bb"),
])
def test_a_malformed_token_entry_fails_at_start_with_its_key(tmp_path: Path, entry: str, key: str) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[server.tokens]\n"bb" = {entry}\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert err.value.fields["key"] == key


def test_one_token_listed_twice_in_two_cases_fails_at_start_with_its_key(tmp_path: Path) -> None:
    # issue 46: its lower-case hash read-only and its upper-case hash admin, the server granted admin
    digest = hash_token("shared-secret")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[server.tokens]\n"{digest}" = {{ tenant = "acme", scope = "read" }}\n'
                   f'"{digest.upper()}" = {{ tenant = "acme", scope = "admin" }}\n')
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ={})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "server.tokens"
    assert "twice" in err.value.message and digest[:12] in err.value.message


def test_one_token_listed_twice_across_the_file_and_the_environment_fails_at_start(tmp_path: Path) -> None:
    digest = hash_token("shared-secret")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[server.tokens]\n"{digest.upper()}" = {{ tenant = "acme", scope = "read" }}\n')
    environ = {"MEMORY_CORE_SERVER_TOKENS": f'{{"{digest}": {{"tenant": "beta", "scope": "admin"}}}}'}
    with pytest.raises(ConfigError) as err:
        load_settings(cfg, environ=environ)
    assert err.value.fields["key"] == "server.tokens"


def test_token_hashes_are_read_in_lower_case(tmp_path: Path) -> None:
    digest = hash_token("t")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[server.tokens]\n"{digest.upper()}" = {{ tenant = "acme", scope = "admin" }}\n')
    assert load_settings(cfg, environ={}).server.tokens == {digest: TokenBinding(tenant="acme", scope=Scope.ADMIN)}


def test_check_token_hashes_refuses_a_bad_tenant_in_a_table_entry() -> None:
    with pytest.raises(ConfigError):
        check_token_hashes({hash_token("t"): TokenBinding(tenant="bad tenant!", agent="alice")})
    check_token_hashes({hash_token("t"): TokenBinding(tenant="acme", agent="alice"), hash_token("u"): "acme"})


def test_memory_core_agent_binds_the_stdio_agent() -> None:
    assert load_settings(environ={"MEMORY_CORE_AGENT": "alice"}).server.agent == "alice"
    assert load_settings(environ={}).server.agent is None


@pytest.mark.parametrize("raw", ["", "has space", "x" * 129, "tab\there"])
def test_a_malformed_memory_core_agent_fails_at_start(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"MEMORY_CORE_AGENT": raw})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "MEMORY_CORE_AGENT"


def test_memory_core_scope_binds_the_stdio_scope_and_write_is_the_default() -> None:
    assert load_settings(environ={"MEMORY_CORE_SCOPE": "read"}).server.scope == "read"
    assert load_settings(environ={}).server.scope == "write"


@pytest.mark.parametrize("raw", ["", "READ", "root", "read,write"])
def test_a_malformed_memory_core_scope_fails_at_start(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings(environ={"MEMORY_CORE_SCOPE": raw})
    assert err.value.code == "CONFIG_INVALID" and err.value.fields["key"] == "MEMORY_CORE_SCOPE"
    assert "read, write, admin" in err.value.message


def test_the_stdio_bridge_refuses_to_start_with_a_malformed_scope(tmp_path: Path) -> None:
    """Before any shared server is started for it (a launch that fails must not leave one running)."""
    proc = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(MEMORY_CORE_SCOPE="everything"), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == EXIT_CONFIG and "MEMORY_CORE_SCOPE" in proc.stderr
    assert not (tmp_path / "data" / "mcp-server.json").exists()


def test_the_stdio_server_refuses_to_start_with_a_malformed_agent(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, *SERVER_COMMAND, "--data-dir", str(tmp_path / "data")],
        cwd=ROOT, env=server_env(MEMORY_CORE_AGENT="two words"), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == EXIT_CONFIG and "CONFIG_INVALID" in proc.stderr and "MEMORY_CORE_AGENT" in proc.stderr


def test_a_configured_agent_fills_omitted_identities_and_refuses_others() -> None:
    scope = TenantScope("acme", "alice")
    assert scope.resolve_agent(None, "viewer") == "alice"
    assert scope.resolve_agent("alice", "agent") == "alice"
    with pytest.raises(AgentMismatchError) as err:
        scope.resolve_agent("bob", "viewer")
    assert err.value.code == "AGENT_MISMATCH" and err.value.fields == {"bound_agent": "alice", "field": "viewer"}


def test_without_an_agent_binding_the_declared_identity_stands() -> None:
    scope = TenantScope("acme")
    assert scope.resolve_agent("bob", "viewer") == "bob" and scope.resolve_agent(None, "viewer") is None


@pytest.mark.anyio
async def test_a_token_binds_its_own_agent_over_the_configured_one() -> None:
    verifier = TokenTenantVerifier({hash_token("alice-t"): TokenBinding(tenant="acme", agent="alice"),
                                    hash_token("acme-t"): "acme"})
    scope = TenantScope("other", "carol")
    for token, agent in (("alice-t", "alice"), ("acme-t", None)):
        access = await verifier.verify_token(token)
        assert access is not None
        reset = auth_context_var.set(AuthenticatedUser(access))
        try:
            assert (scope.bound(), scope.bound_agent()) == ("acme", agent)
        finally:
            auth_context_var.reset(reset)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


