"""Who may act as which tenant and agent: bearer tokens over HTTP, a configured binding otherwise.

- ``[server.tokens]`` maps ``sha256(token)`` (hex) to a tenant (``"acme"``) or to a tenant,
  optionally one agent, and a scope (``{tenant = "acme", agent = "alice", scope = "read"}``);
  the file never holds a plaintext token. With tokens configured, an HTTP request without a
  valid token gets 401 from the SDK's bearer middleware, and a valid one binds what its entry
  names. An entry without a scope (every entry written before scopes existed) is ``write``.
- ``server.tenant`` / ``server.agent`` / ``server.scope`` (or ``MEMORY_CORE_TENANT`` /
  ``MEMORY_CORE_AGENT`` / ``MEMORY_CORE_SCOPE``) bind when no token does: stdio, or HTTP
  without tokens. A token replaces all three.
- The scope decides which tools a connection lists and may call (SCOPE_DENIED otherwise) and,
  under ``write``, that only the caller's own rows can be corrected, locked or deleted
  (:mod:`memory_core.scopes`).
- A bound tenant fills an omitted ``tenant`` argument; naming another is TENANT_MISMATCH.
  With no binding, the tenant argument is required on every call (fail closed).
- A bound agent is the only author (``agent``) and ``viewer`` the connection can use: it
  fills them when omitted; naming another is AGENT_MISMATCH. Without an agent binding the
  viewer is whatever the caller declares (private rows are private from honest agents only).
- Binding HTTP to a non-loopback host without tokens refuses to start.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Mapping
from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from memory_core import (
    DEFAULT_SCOPE,
    NAME_PATTERN,
    TENANT_PATTERN,
    AgentMismatchError,
    ConfigError,
    Scope,
    TenantMismatchError,
    TenantRequiredError,
    TokenBinding,
    parse_scope,
)

TENANT_CLAIM = "tenant"
AGENT_CLAIM = "agent"
SCOPE_CLAIM = "scope"
BRIDGE_CLAIM = "bridge"  # a bridged stdio client: its token's binding is the whole binding, unbound included
_SHA256_HEX_LEN = 64


def hash_token(token: str) -> str:
    """The form a token takes in the config file: its sha256, lowercase hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


TokenEntry = str | TokenBinding  # a config entry: "tenant" or {tenant, agent?, scope?}


def binding_of(entry: TokenEntry) -> TokenBinding:
    return TokenBinding(tenant=entry) if isinstance(entry, str) else entry


class TokenTenantVerifier:
    """The SDK's ``TokenVerifier`` over ``{sha256_hex(token): tenant or {tenant, agent?, scope?}}``.

    Tokens are looked up by their hash, so the comparison never touches the secret
    itself and the config file holds nothing worth stealing.
    """

    def __init__(self, token_hashes: Mapping[str, TokenEntry]) -> None:
        self._bindings = {digest.lower(): binding_of(entry) for digest, entry in token_hashes.items()}

    async def verify_token(self, token: str) -> AccessToken | None:
        binding = self._bindings.get(hash_token(token))
        if binding is None:
            return None
        claims = {TENANT_CLAIM: binding.tenant, SCOPE_CLAIM: binding.scope.value}
        client_id = f"tenant:{binding.tenant}"
        if binding.agent is not None:
            claims[AGENT_CLAIM] = binding.agent
            client_id += f"/agent:{binding.agent}"
        return AccessToken(token=token, client_id=client_id, scopes=[binding.scope.value], subject=binding.tenant,
                           claims=claims)


def check_token_hashes(token_hashes: Mapping[str, TokenEntry]) -> None:
    """Fail at start when a ``[server.tokens]`` key is not a sha256 hex digest or its entry is malformed."""
    for digest, entry in token_hashes.items():
        if not isinstance(entry, str | TokenBinding):
            raise ConfigError("server.tokens: each entry is \"tenant\" or {tenant = ..., agent = ..., scope = ...}.",
                              key="server.tokens")
        binding = binding_of(entry)
        if len(digest) != _SHA256_HEX_LEN or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise ConfigError(
                f"server.tokens: the key for tenant '{binding.tenant}' is not a sha256 hex digest; store "
                "sha256(token), never the token (`memory-core token TENANT [--agent AGENT]` prints the line).",
                key="server.tokens",
            )
        if not TENANT_PATTERN.match(binding.tenant):
            raise ConfigError(f"server.tokens: '{binding.tenant[:80]}' is not a valid tenant name.",
                              key="server.tokens")
        if binding.agent is not None and not NAME_PATTERN.match(binding.agent):
            raise ConfigError(f"server.tokens: '{binding.agent[:80]}' is not a valid agent id.", key="server.tokens")


def token_config_line(digest: str, tenant: str, agent: str | None = None, scope: Scope = DEFAULT_SCOPE) -> str:
    """The ``[server.tokens]`` line for a token's sha256: its tenant, its agent if any, and its scope
    (always written, so the file says what each token may do)."""
    fields = [f"tenant = {json.dumps(tenant)}"]
    if agent is not None:
        fields.append(f"agent = {json.dumps(agent)}")
    fields.append(f"scope = {json.dumps(scope.value)}")
    return f'"{digest}" = {{ {", ".join(fields)} }}'


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token_hashes: Mapping[str, object]) -> None:
    """Refuse to serve HTTP beyond this machine without tokens: every tenant would be open."""
    if not token_hashes and not is_loopback(host):
        raise ConfigError(
            f"Refusing to listen on {host}: it is reachable from other machines and no bearer tokens are "
            "configured, so any client could read and write every tenant. Add [server.tokens] "
            "(sha256 of each token -> tenant) or bind to 127.0.0.1.",
            key="server.host",
        )


@dataclass(frozen=True)
class TenantScope:
    """Resolves the tenant, the agent and the access scope a tool call acts as.

    ``configured`` / ``configured_agent`` / ``configured_scope`` are the config binding
    (``server.tenant``, ``server.agent``, ``server.scope``); a request's bearer token takes
    precedence over all three (a token that binds a tenant only binds no agent, whatever the
    config says, and carries its own scope).
    """

    configured: str | None = None
    configured_agent: str | None = None
    configured_scope: Scope = DEFAULT_SCOPE

    def bound(self) -> str | None:
        token = get_access_token()
        if token is not None and token.claims and token.claims.get(BRIDGE_CLAIM):
            tenant = token.claims.get(TENANT_CLAIM)
            return None if tenant is None else str(tenant)
        if token is not None and token.claims and token.claims.get(TENANT_CLAIM):
            return str(token.claims[TENANT_CLAIM])
        return self.configured

    def bound_agent(self) -> str | None:
        token = get_access_token()
        if token is not None and token.claims and (token.claims.get(BRIDGE_CLAIM) or token.claims.get(TENANT_CLAIM)):
            agent = token.claims.get(AGENT_CLAIM)
            return None if agent is None else str(agent)
        return self.configured_agent

    def access(self) -> Scope:
        """What this call may do. A token's own scope; a token without one (none of ours mints
        such a token) may only read: fail closed."""
        token = get_access_token()
        if token is not None and token.claims and (token.claims.get(BRIDGE_CLAIM) or token.claims.get(TENANT_CLAIM)):
            return parse_scope(token.claims.get(SCOPE_CLAIM)) or Scope.READ
        return self.configured_scope

    def resolve_agent(self, requested: str | None, field: str) -> str | None:
        """The bound agent, else the requested one (None: not given); another one is AGENT_MISMATCH.

        ``field`` names the argument (``agent`` for authors, ``viewer`` for readers).
        """
        bound = self.bound_agent()
        if bound is None:
            return requested  # the service validates its form
        if requested is not None and requested != bound:
            raise AgentMismatchError(
                f"This connection is bound to agent '{bound}'; omit '{field}' or pass '{bound}'.",
                bound_agent=bound,
                field=field,
            )
        return bound

    def resolve(self, requested: str | None) -> str:
        """The bound tenant, the requested one, or a TENANT_REQUIRED / TENANT_MISMATCH error."""
        bound = self.bound()
        if bound is None:
            if requested is None:
                raise TenantRequiredError(
                    "A tenant is required: pass 'tenant' (this server binds none to the connection)."
                )
            return requested  # the service validates its form
        if requested is not None and requested != bound:
            raise TenantMismatchError(
                f"This connection is bound to tenant '{bound}'; omit 'tenant' or pass '{bound}'.",
                bound_tenant=bound,
            )
        return bound
