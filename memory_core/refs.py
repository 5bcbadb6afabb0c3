"""Public handles: ``mem:<id>`` / ``ep:<id>`` refs and opaque, tenant-bound page cursors.

A cursor is ``base64url(json) + "." + hmac`` where the MAC covers the tenant and the
session with a secret kept in the data directory: a cursor edited by hand, or minted
for another tenant or session, fails verification and reads as ``INVALID_CURSOR``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
from dataclasses import dataclass

from memory_core.errors import InvalidCursorError, InvalidRefError

REF_PATTERN = re.compile(r"^(mem|ep):([1-9][0-9]{0,17})$")
MAX_ID = 10**18 - 1  # the largest id a ref can name (18 digits)
# The largest id an import (or a doctor restore) may keep from its source: a larger one gets a
# fresh id, so no file can move the shared sequence near MAX_ID (2**53 - 1: also the largest id
# every JSON client reads exactly as a number).
MAX_KEPT_ID = 2**53 - 1
MEMORY = "mem"
EPISODE = "ep"


@dataclass(frozen=True)
class Ref:
    kind: str
    id: int

    def __str__(self) -> str:
        return f"{self.kind}:{self.id}"


def memory_ref(mem_id: int) -> str:
    return f"{MEMORY}:{mem_id}"


def episode_ref(ep_id: int) -> str:
    return f"{EPISODE}:{ep_id}"


def parse_ref(value: object) -> Ref:
    """Parse ``mem:<id>`` or ``ep:<id>``; anything else is ``INVALID_REF``."""
    if not isinstance(value, str):
        raise InvalidRefError("A ref must be a string like 'mem:42'.")
    match = REF_PATTERN.match(value.strip())
    if not match:
        raise InvalidRefError(f"{value[:80]!r} is not a ref; refs look like 'mem:42' or 'ep:7'.")
    return Ref(match.group(1), int(match.group(2)))


@dataclass(frozen=True)
class CursorPosition:
    """The last row of the previous page, in (timestamp µs, id) order."""

    ts_us: int
    id: int


class CursorCodec:
    """Mints and verifies cursors for one data directory."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, scope: str, payload: bytes) -> str:
        digest = hmac.new(self._secret, scope.encode() + b"\x00" + payload, hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest[:18]).decode().rstrip("=")

    def encode(self, scope: str, position: CursorPosition) -> str:
        payload = json.dumps([position.ts_us, position.id], separators=(",", ":")).encode()
        body = base64.urlsafe_b64encode(payload).decode().rstrip("=")
        return f"{body}.{self._mac(scope, payload)}"

    def decode(self, scope: str, cursor: object) -> CursorPosition:
        if not isinstance(cursor, str) or len(cursor) > 200 or not cursor.isascii() or cursor.count(".") != 1:
            raise InvalidCursorError("The cursor is malformed; pass back a next_cursor exactly as returned.")
        body, mac = cursor.split(".")
        try:
            payload = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, UnicodeEncodeError) as exc:
            raise InvalidCursorError("The cursor is malformed.") from exc
        if not hmac.compare_digest(mac, self._mac(scope, payload)):
            raise InvalidCursorError("The cursor does not belong to this tenant and session.")
        try:
            ts_us, mem_id = json.loads(payload)
            return CursorPosition(int(ts_us), int(mem_id))
        except (ValueError, TypeError) as exc:
            raise InvalidCursorError("The cursor is malformed.") from exc
