"""Who may act as which tenant: bearer tokens over HTTP, a configured binding otherwise.

- ``[server.tokens]`` maps ``sha256(token)`` (hex) to a tenant; the file never holds a
  plaintext token. With tokens configured, an HTTP request without a valid token gets
  401 from the SDK's bearer middleware, and a valid one binds its tenant.
- ``server.tenant`` (or ``MEMORY_CORE_TENANT``) binds the tenant when no token does:
  stdio, or HTTP without tokens.
- A bound tenant fills an omitted ``tenant`` argument; naming another is TENANT_MISMATCH.
  With no binding, the tenant argument is required on every call (fail closed).
- Binding HTTP to a non-loopback host without tokens refuses to start.
"""

from __future__ import annotations

import hashlib
import ipaddress
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from memory_core.errors import ConfigError, TenantMismatchError, TenantRequiredError
from memory_core.validation import TENANT_PATTERN

TENANT_CLAIM = "tenant"
_SHA256_HEX_LEN = 64


def hash_token(token: str) -> str:
    """The form a token takes in the config file: its sha256, lowercase hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenTenantVerifier:
    """The SDK's ``TokenVerifier`` over ``{sha256_hex(token): tenant}``.

    Tokens are looked up by their hash, so the comparison never touches the secret
    itself and the config file holds nothing worth stealing.
    """

    def __init__(self, token_hashes: Mapping[str, str]) -> None:
        self._tenants = {digest.lower(): tenant for digest, tenant in token_hashes.items()}

    async def verify_token(self, token: str) -> AccessToken | None:
        tenant = self._tenants.get(hash_token(token))
        if tenant is None:
            return None
        return AccessToken(
            token=token,
            client_id=f"tenant:{tenant}",
            scopes=[],
            subject=tenant,
            claims={TENANT_CLAIM: tenant},
        )


def check_token_hashes(token_hashes: Mapping[str, str]) -> None:
    """Fail at start when a ``[server.tokens]`` key is not a sha256 hex digest."""
    for digest, tenant in token_hashes.items():
        if len(digest) != _SHA256_HEX_LEN or any(c not in "0123456789abcdefABCDEF" for c in digest):
            raise ConfigError(
                f"server.tokens: the key for tenant '{tenant}' is not a sha256 hex digest; store "
                "sha256(token), never the token (`python -m tools.auth TOKEN TENANT` prints the line).",
                key="server.tokens",
            )
        if not isinstance(tenant, str) or not TENANT_PATTERN.match(tenant):
            raise ConfigError(f"server.tokens: '{str(tenant)[:80]}' is not a valid tenant name.", key="server.tokens")


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token_hashes: Mapping[str, str]) -> None:
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
    """Resolves the tenant a tool call acts as.

    ``configured`` is the config binding (``server.tenant``); a tenant bound by the
    request's bearer token takes precedence over it.
    """

    configured: str | None = None

    def bound(self) -> str | None:
        token = get_access_token()
        if token is not None and token.claims and token.claims.get(TENANT_CLAIM):
            return str(token.claims[TENANT_CLAIM])
        return self.configured

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


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.auth TOKEN``: print the line to put under ``[server.tokens]``."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m tools.auth TOKEN TENANT", file=sys.stderr)
        return 2
    token, tenant = args
    print(f'"{hash_token(token)}" = "{tenant}"')
    return 0


if __name__ == "__main__":
    sys.exit(main())
