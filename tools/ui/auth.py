"""Who may open the inspector: the operator token only, from the same machine's names.

- ``[server] operator_token_sha256`` holds sha256(operator token); no token configured means
  the inspector is disabled (every page answers 403 saying how to enable it).
- A request is the operator's when it carries ``Authorization: Bearer <operator token>`` or the
  session cookie the login form sets (HttpOnly, SameSite=Strict, Path=/ui). The cookie holds a
  random session id kept in this process, never the token; logout forgets it.
- A tenant-bound agent token (``[server.tokens]``) gets 403: agents never see other tenants.
- Host and Origin must name this machine (loopback names, or the configured bind host), so a
  page on another site cannot drive the inspector through the operator's browser (DNS rebinding,
  cross-site forms).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from enum import Enum
from urllib.parse import urlsplit

from tools.auth import hash_token

COOKIE = "mc_ui_session"
SESSION_TTL_S = 12 * 3600
MAX_SESSIONS = 256
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class Caller(Enum):
    OPERATOR = "operator"
    AGENT = "agent"  # a valid tenant-bound token: authenticated, but not allowed here
    UNKNOWN = "unknown"  # no credentials, or ones that match nothing


class OperatorAuth:
    """Checks operator credentials and keeps the login sessions of this process."""

    def __init__(self, operator_sha256: str | None, agent_token_hashes: Iterable[str]) -> None:
        self.enabled = operator_sha256 is not None
        self._operator = (operator_sha256 or "").lower()
        self._agents = frozenset(h.lower() for h in agent_token_hashes)
        self._sessions: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def classify_token(self, token: str) -> Caller:
        digest = hash_token(token)
        if self.enabled and hmac.compare_digest(digest, self._operator):
            return Caller.OPERATOR
        if digest in self._agents:
            return Caller.AGENT
        return Caller.UNKNOWN

    def classify(self, headers: Mapping[str, str], cookies: Mapping[str, str]) -> Caller:
        """The caller of a request: bearer header first, then the session cookie."""
        auth = headers.get("authorization", "")
        scheme, _, token = auth.partition(" ")
        if auth and scheme.lower() == "bearer" and token.strip():
            return self.classify_token(token.strip())
        sid = cookies.get(COOKIE)
        if sid and self._session_valid(sid):
            return Caller.OPERATOR
        return Caller.UNKNOWN

    def open_session(self) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[sid] = time.monotonic() + SESSION_TTL_S
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return sid

    def close_session(self, sid: str | None) -> None:
        if sid:
            with self._lock:
                self._sessions.pop(sid, None)

    def _session_valid(self, sid: str) -> bool:
        with self._lock:
            expires = self._sessions.get(sid)
            if expires is None:
                return False
            if expires < time.monotonic():
                del self._sessions[sid]
                return False
            return True


class HostCheck:
    """Host and Origin must name this machine: loopback names, or the configured bind host."""

    def __init__(self, bind_host: str | None = None) -> None:
        names = set(LOOPBACK_NAMES)
        if bind_host and bind_host not in ("0.0.0.0", "::", ""):
            names.add(bind_host.strip("[]").lower())
        self.names = frozenset(names)

    def host_ok(self, host_header: str | None) -> bool:
        if not host_header:
            return False
        name = _hostname(f"//{host_header}")
        return name is not None and name in self.names

    def origin_ok(self, origin: str | None) -> bool:
        """No Origin (same-origin GETs, non-browser clients) is fine; a foreign or opaque one is not."""
        if origin is None:
            return True
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https"):
            return False
        name = _hostname(origin)
        return name is not None and name in self.names


def _hostname(url: str) -> str | None:
    try:
        name = urlsplit(url).hostname
    except ValueError:  # a malformed port or bracket
        return None
    return name.lower() if name else None


def safe_next(target: str | None, root: str) -> str:
    """Where to go after login: a path inside the inspector, never another site."""
    home = f"{root}/"
    if not target or not target.startswith(home) or target.startswith("//") or "\\" in target:
        return home
    return target
