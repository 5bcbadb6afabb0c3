"""What a running server and its bridged stdio clients agree on: the record, the secret's signatures, the paths.

Every ``memory-core serve --http`` announces itself in its data directory (``mcp-server.json``,
mode 0600: URL, pid, a fresh per-start secret and its request size limit) and withdraws the file
when it stops. The secret is what trust rests on, both ways (docs/shared-server.md):

- the server proves to a client that it holds the secret: its answer to ``HELLO_PATH?nonce=…``
  is :func:`server_proof` (an HMAC of the port it was reached on and the client's nonce);
- an operator's command on the same machine proves it owns the directory: an *operator token*
  (:func:`operator_token`) asks the server to run a re-embed in its own process;
- a client proves its binding to the server: a *bridge token* (:func:`bridge_token`) is the stdio
  client's tenant, agent and scope signed with the secret, which only a process that can read
  the 0600 file (the owner of the data directory) can mint.

It sits beside the stdio bridge (:mod:`tools.bridge`, which reads the record, checks the proof and
mints tokens) and the serving process (:mod:`tools.serve`, which writes the record, answers the
hello and reads tokens), not inside either: both import it, and neither imports the other.

Stdlib only: the bridge imports this module and must start in a fraction of a second.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from memory_core import DEFAULT_SCOPE, Scope, parse_scope

ANNOUNCEMENT = "mcp-server.json"
MCP_PATH = "/mcp"  # the streamable HTTP endpoint
HELLO_PATH = "/mcp-bridge/hello"  # the server's proof that it holds the record's secret
ATTACH_PATH = "/mcp-bridge/attach"  # held open by a bridge while its client is connected: the server is not idle
REEMBED_PATH = "/mcp-operator/reembed"  # the operator's re-embed, run by the server (tools.serve.reembed_route)
TOKEN_PREFIX = "mcb1."
OPERATOR_TOKEN_PREFIX = "mco1."
NONCE = re.compile(r"[0-9a-f]{32,128}")


@dataclass(frozen=True)
class Announcement:
    """What a running server says about itself in its data directory."""

    url: str
    pid: int
    secret: str
    shared: bool
    max_request_bytes: int | None = None  # the server's server.max_request_bytes (None: an older record)

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 80


# ---- the record ------------------------------------------------------------------------------
def announce(data_dir: Path, url: str, secret: str, *, shared: bool, max_request_bytes: int | None = None) -> None:
    """Write the announcement atomically, readable by the owner only (it holds the secret)."""
    record: dict[str, object] = {"url": url, "pid": os.getpid(), "secret": secret, "shared": shared}
    if max_request_bytes is not None:
        record["max_request_bytes"] = max_request_bytes  # bridges refuse larger requests without sending them
    body = json.dumps(record)
    tmp = data_dir / f".{ANNOUNCEMENT}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask or a leftover file said
        os.write(fd, body.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, data_dir / ANNOUNCEMENT)


def withdraw(data_dir: Path) -> None:
    """Remove the announcement if it is still this process's own."""
    found = read_announcement(data_dir)
    if found is not None and found.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (data_dir / ANNOUNCEMENT).unlink()


def read_announcement(data_dir: Path) -> Announcement | None:
    """The announcement, or None when there is none or it is unreadable/malformed."""
    try:
        raw = json.loads((data_dir / ANNOUNCEMENT).read_text())
        limit = raw.get("max_request_bytes")
        return Announcement(str(raw["url"]), int(raw["pid"]), str(raw["secret"]), bool(raw.get("shared")),
                            limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def new_secret() -> str:
    """A fresh secret for one server start."""
    return secrets.token_hex(32)


# ---- what the secret signs -------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _sign(secret: str, payload: str) -> str:
    return hmac.new(secret.encode(), payload.encode(), hashlib.sha256).hexdigest()


def server_proof(secret: str, nonce: str, port: int) -> str:
    """The server's answer to a hello: its secret's HMAC of the port it was reached on and the client's nonce.

    The port is in it so that a listener on another port cannot pass on a proof it obtained
    from the real server.
    """
    return _sign(secret, f"memory-core-server-proof|{port}|{nonce}")


@dataclass(frozen=True)
class BridgeBinding:
    """What a bridged stdio client is bound to: tenant and agent (None: unbound) and its scope."""

    tenant: str | None
    agent: str | None
    scope: Scope = DEFAULT_SCOPE


def bridge_token(secret: str, binding: BridgeBinding) -> str:
    """The bearer token of a bridged connection: its binding, signed with the directory's secret."""
    body = {"tenant": binding.tenant, "agent": binding.agent, "scope": binding.scope.value}
    payload = _b64(json.dumps(body, separators=(",", ":")).encode())
    return f"{TOKEN_PREFIX}{payload}.{_sign(secret, payload)}"


def read_bridge_token(secret: str, token: str) -> BridgeBinding | None:
    """The binding a valid bridge token carries; None for anything else (a forged or altered one).

    A token without a scope (a bridge of a version before scopes) has the default scope."""
    if not token.startswith(TOKEN_PREFIX):
        return None
    payload, _, signature = token[len(TOKEN_PREFIX):].partition(".")
    if not hmac.compare_digest(_sign(secret, payload), signature):
        return None
    try:
        binding = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except ValueError:
        return None
    if not isinstance(binding, dict):
        return None
    tenant, agent, scope = binding.get("tenant"), binding.get("agent"), binding.get("scope", DEFAULT_SCOPE.value)
    if not all(value is None or isinstance(value, str) for value in (tenant, agent)):
        return None
    parsed = parse_scope(scope)
    return None if parsed is None else BridgeBinding(tenant, agent, parsed)


def operator_token(secret: str) -> str:
    """The bearer token of the directory owner's operator requests (a re-embed run by the server): only a
    process that can read the 0600 record can mint it, like a bridge token; it binds no tenant."""
    return f"{OPERATOR_TOKEN_PREFIX}{_sign(secret, 'memory-core-operator')}"


def is_operator_token(secret: str, token: str) -> bool:
    """True for :func:`operator_token` of ``secret``, False for anything else."""
    return hmac.compare_digest(operator_token(secret).encode(), token.encode("utf-8", "replace"))
